package org.dtorch.core.runtime.process;

import org.dtorch.core.graph.OpSpec;

/**
 * How one {@link OpSpec} type crosses to a worker process: its parameters written to, and read back from,
 * the control channel's binary encoding. A module that defines operators registers their codecs through
 * an {@link OpSpecCodecProvider}; an operator without a codec is refused in per-device-process mode
 * before it is queued.
 *
 * <p>{@link #read} must validate what it reads as the spec's public constructor would (a decoded spec is
 * run as it is), and throw {@link ProtocolException} for values no writer produces.
 *
 * <p>Thread-safe: implementations must be stateless.
 *
 * @param <S> the spec type
 */
public interface OpSpecCodec<S extends OpSpec> {

    /** The exact class this codec writes. */
    Class<S> specClass();

    /** A stable name for the spec type on the wire, unique among all codecs: {@code ops.add}. */
    String tag();

    /** Writes the parameters of {@code spec}. */
    void write(S spec, SpecWriter out);

    /** Reads the parameters written by {@link #write} and builds the spec, in the worker. */
    S read(SpecReader in);
}
