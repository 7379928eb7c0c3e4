package org.dtorch.autograd;

import java.util.List;
import org.dtorch.api.DTensor;

/**
 * A recorded operator's forward issued so that it keeps what its derivative needs beyond its inputs and outputs (what
 * the plain operator computes and drops), with the derivative that uses it ({@link Derivatives#savingForward}).
 *
 * @param outputs    the operator's outputs, as the plain operator gives them to the program
 * @param derivative the derivative, which reads what was kept
 * @param kept       the tensors kept for the derivative alone: the tape's, closed when a backward pass frees the node
 *                   (otherwise released with the node's last reference)
 */
public record SavedForward(List<DTensor> outputs, Derivative derivative, List<DTensor> kept) {
}
