/**
 * The script launcher behind {@code ./dtorch run script.py}: starts a DTorch runtime, a GraalPy context
 * with the {@code dtorch} package, runs the script, and returns its exit code.
 */
package org.dtorch.python;
