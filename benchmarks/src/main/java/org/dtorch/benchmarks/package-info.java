/**
 * Plain-Java harnesses that time DTorch's operations against their strongest sensible baseline in the
 * same run, repeat each measurement over several runs, and print Markdown tables (median and range over
 * the runs, the commit measured) in the format of {@code docs/benchmarks.md}.
 *
 * <p>{@link org.dtorch.benchmarks.CommBenchmarks} is the entry point; {@code benchmarks/run-all.sh} runs
 * every harness at full size. Nothing else in the project depends on this package.
 */
package org.dtorch.benchmarks;
