/**
 * The timeline tracer (docs/observability.md): {@link org.dtorch.core.trace.Tracer} records what the pipeline and
 * the communication core do, per thread and without locks, while it is on; {@link org.dtorch.core.trace.Trace} is
 * what one session recorded, exported as Chrome trace event JSON (Perfetto, {@code chrome://tracing}) or summed
 * into a table per operator and collective; {@link org.dtorch.core.trace.Profiler} is the user's handle on a session.
 */
package org.dtorch.core.trace;
