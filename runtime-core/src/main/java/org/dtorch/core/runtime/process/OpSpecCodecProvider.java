package org.dtorch.core.runtime.process;

import java.util.List;

/**
 * Service interface ({@link java.util.ServiceLoader}) through which a module registers the codecs of its
 * operators: list the implementation in {@code META-INF/services/org.dtorch.core.runtime.process.OpSpecCodecProvider}.
 *
 * <p>Thread-safe: implementations must be stateless.
 */
public interface OpSpecCodecProvider {

    /** The codecs this module contributes. */
    List<OpSpecCodec<?>> codecs();
}
