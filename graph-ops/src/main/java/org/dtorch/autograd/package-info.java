/**
 * The derivatives of distributed operators: for each operator the tape records ({@link org.dtorch.api.GradTape}), how
 * the gradients of its inputs follow from the gradients of its outputs, as distributed operators themselves (ATen's
 * {@code *_backward} operators where ATen has them, compositions of ordinary operators otherwise).
 */
package org.dtorch.autograd;
