/**
 * Shared memory between processes of one host: named regions mapped from files under
 * {@code /dev/shm} (owner-only), atomic access to them, and a futex through the FFM API so that a waiter
 * truly sleeps and is woken by a write in another process.
 */
package org.dtorch.core.shm;
