package org.dtorch.ops.aten;

/**
 * How one call binds to one overload: the source of each parameter, in schema order, and the total conversion cost
 * (the lowest-cost overload wins, as in PyTorch's Python argument parser).
 *
 * @param overload the overload
 * @param sources  one per schema parameter
 * @param cost     the sum of the parameters' {@link ParamType#cost}s
 *
 * <p>Immutable once built (callers do not modify {@code sources}), so thread-safe.
 */
public record CallPlan(Overload overload, ArgSource[] sources, int cost) {
}
