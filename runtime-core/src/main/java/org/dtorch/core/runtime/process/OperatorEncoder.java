package org.dtorch.core.runtime.process;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.dtorch.core.graph.Operator;


/**
 * Encodes each operator once for all the workers it goes to (the controller sends it to its devices one
 * after the other), and keeps the shared memory an encoding refers to until every device ran the operator.
 *
 * <p>Thread-safe: {@link #encode} on the controller thread; {@link #release} from any reader thread.
 */
final class OperatorEncoder {
    private final String sharedPrefix;
    private final Map<Long, OperatorCodec.Encoded> holding = new ConcurrentHashMap<>();
    private long lastId = -1;
    private OperatorCodec.Encoded last;

    OperatorEncoder(String sharedPrefix) {
        this.sharedPrefix = sharedPrefix;
    }

    OperatorCodec.Encoded encode(Operator op) {
        if (op.id() != lastId) {
            OperatorCodec.Encoded encoded = OperatorCodec.encode(op, sharedPrefix);
            if (!encoded.resources().isEmpty()) {
                holding.put(op.id(), encoded);
            }
            last = encoded;
            lastId = op.id();
        }
        return last;
    }

    /** Every device ran {@code op}: its shared memory can go. */
    void release(Operator op) {
        OperatorCodec.Encoded encoded = holding.remove(op.id());
        if (encoded != null) {
            encoded.release();
        }
    }

    /** At shutdown. */
    void releaseAll() {
        holding.values().forEach(OperatorCodec.Encoded::release);
        holding.clear();
    }
}
