package org.dtorch.polyglot.torch;

/**
 * No overload of an operator takes the arguments of a call; the message names the operator, the kinds of the
 * arguments and every schema tried. Python's {@code torch} package raises it as {@code TypeError}, as PyTorch does.
 */
public final class ArgumentMismatchException extends IllegalArgumentException {
    private static final long serialVersionUID = 1L;

    ArgumentMismatchException(String message) {
        super(message);
    }
}
