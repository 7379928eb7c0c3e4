/**
 * Shared memory between processes of one host: named regions mapped from files under
 * {@code /dev/shm} (owner-only), atomic access to them, and a futex through the FFM API so that a waiter
 * truly sleeps and is woken by a write in another process. {@link org.dtorch.core.shm.OwnedPaths} holds the
 * rules that keep other users of the host out: directories checked, regions opened without following links
 * and checked with {@code fstat} before they are mapped, and a janitor that removes only this user's files of
 * processes that have verifiably exited.
 */
package org.dtorch.core.shm;
