package org.dtorch.core.graph;

/**
 * What the client sends the controller, in program order.
 *
 * <p>Thread-safe: immutable records.
 */
public sealed interface GraphMessage {

    /** Adds an operator to the graph. */
    record AddOperator(Operator operator) implements GraphMessage {
    }

    /** The client dropped its handle of an operand. */
    record ReleaseOperand(Operand operand) implements GraphMessage {
    }
}
