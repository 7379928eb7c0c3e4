/**
 * The safetensors file format: its header ({@link org.dtorch.core.safetensors.SafeTensorsHeader}, parsed by a small
 * strict JSON reader and validated before any byte of data is touched), its dtypes, the writing of a header, and the
 * mapped reads and writes of one device's shard ({@link org.dtorch.core.safetensors.MappedShards}): the byte ranges a
 * shard occupies in a row-major tensor, mapped a bounded window at a time through FFM and unmapped at once.
 */
package org.dtorch.core.safetensors;
