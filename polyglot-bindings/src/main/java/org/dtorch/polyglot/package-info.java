/**
 * What the Python package {@code dtorch} talks to. {@link org.dtorch.polyglot.PythonHost} owns the GraalPy
 * {@code Context} (on a shared {@code Engine} where several exist) with a host-access allow-list: Python can
 * call the methods of {@link org.dtorch.polyglot.PyBridge}, {@link org.dtorch.polyglot.PyTensorFuture} and the
 * {@code torch} package's classes ({@link org.dtorch.polyglot.torch}) and nothing else of the JVM. No polyglot {@code Value} escapes
 * the call that received it.
 */
package org.dtorch.polyglot;
