package org.dtorch.core.communication.store;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.dtorch.core.shm.ShmTensors;
import org.dtorch.core.tensor.TorchTensors;

/**
 * The keys and values a {@link NetworkTensorStore} keeps on its c10d {@code TCPStore} (docs/communication-core.md,
 * "NetworkTensorStore"). Nobody else spells them.
 *
 * <pre>
 * dtorch/ts/&lt;S&gt;/                       one store key S, across its lifetimes
 *   world                   "W"        compareSet by every creator: a mismatch is refused
 *   open                    counter    ranks open now; the last to leave deletes world
 *   r&lt;r&gt;/slot                token      compareSet while rank r is open: a second rank r is refused
 *   r&lt;r&gt;/opens               counter    rank r's creations; its value - 1 is the lifetime I all ranks share
 *   i&lt;I&gt;/                                one lifetime (every rank created the store I times before)
 *     host/&lt;r&gt;              "hostId\tglooAddress\tpid"      where rank r is
 *     b/&lt;n&gt;                 counter    arrivals at barrier n (withdrawn by a rank that gives up)
 *     b/&lt;n&gt;/done            "1"        set by the last arrival; the last arrival of n + 1 deletes n's keys
 *     rq/&lt;r&gt;                queue      take requests to rank r ("epoch serial consumer tag K")
 *     gloo/                            the Gloo group's rendezvous (a c10d PrefixStore)
 *     e&lt;E&gt;/k/&lt;K&gt;/                       tensor key K in epoch E (reset() starts the next epoch)
 *       live                token      compareSet by srcSet, deleted when its producer's wait returns
 *       published           counter    tickets published by producers, over every set of K
 *       takes               counter    tickets claimed by consumers, over every set of K
 *       t/&lt;n&gt;               value      ticket n: a set's description, or "abandoned" by a consumer that gave up
 *       s&lt;serial&gt;/fin       counter    finished consumers of one set
 *       s&lt;serial&gt;/done      "1"        set by the consumer that finishes last
 * </pre>
 * {@code <S>} and {@code <K>} are written {@code <UTF-8 byte length>:<text>}, so that no key or store key, whatever
 * slashes it holds, can spell another's keys.
 *
 * <p>A ticket's value, one line of decimal fields separated by spaces:
 * <pre>
 *   producerRank serial getCount dtypeCode dims size0 size1 ...
 * </pre>
 * A take request: {@code epoch serial consumerRank tag K} (K raw, the rest of the line), or {@code stop}.
 *
 * <p>Thread-safe: stateless.
 */
final class NetworkStoreLayout {
    /** What a consumer that gave up on a ticket leaves in it; never a valid description. */
    static final String ABANDONED = "abandoned";
    /** The take request that ends a rank's sender. */
    static final String STOP = "stop";

    private NetworkStoreLayout() {
    }

    /** {@code dtorch/ts/<S>/}: every key of store key {@code storeKey}. */
    static String store(String storeKey) {
        return "dtorch/ts/" + counted(storeKey) + "/";
    }

    static String world(String store) {
        return store + "world";
    }

    static String open(String store) {
        return store + "open";
    }

    static String slot(String store, int rank) {
        return store + "r" + rank + "/slot";
    }

    static String opens(String store, int rank) {
        return store + "r" + rank + "/opens";
    }

    /** {@code dtorch/ts/<S>/i<I>/}: one lifetime of the store. */
    static String lifetime(String store, long lifetime) {
        return store + "i" + lifetime + "/";
    }

    static String host(String lifetime, int rank) {
        return lifetime + "host/" + rank;
    }

    static String barrier(String lifetime, long n) {
        return lifetime + "b/" + n;
    }

    static String barrierDone(String lifetime, long n) {
        return lifetime + "b/" + n + "/done";
    }

    static String requests(String lifetime, int rank) {
        return lifetime + "rq/" + rank;
    }

    static String gloo(String lifetime) {
        return lifetime + "gloo/";
    }

    /** {@code .../e<E>/k/<K>/}: every key of tensor key {@code key} in epoch {@code epoch}. */
    static String tensorKey(String lifetime, long epoch, String key) {
        return lifetime + "e" + epoch + "/k/" + counted(key) + "/";
    }

    static String live(String tensorKey) {
        return tensorKey + "live";
    }

    static String published(String tensorKey) {
        return tensorKey + "published";
    }

    static String takes(String tensorKey) {
        return tensorKey + "takes";
    }

    static String ticket(String tensorKey, long ticket) {
        return tensorKey + "t/" + ticket;
    }

    static String finished(String tensorKey, long serial) {
        return tensorKey + "s" + serial + "/fin";
    }

    static String done(String tensorKey, long serial) {
        return tensorKey + "s" + serial + "/done";
    }

    /** {@code <UTF-8 byte length>:<text>}. */
    static String counted(String text) {
        return text.getBytes(StandardCharsets.UTF_8).length + ":" + text;
    }

    /**
     * What a ticket says: who set the value, which set of the key it is ({@code serial}, unique per key and epoch), for
     * how many consumers, and the value's dtype and shape.
     */
    record Published(int producer, long serial, int getCount, ScalarType dtype, long[] shape) {
        String encode() {
            StringBuilder b = new StringBuilder().append(producer).append(' ').append(serial).append(' ').append(getCount).append(' ')
                .append(dtype.value).append(' ').append(shape.length);
            for (long s : shape) {
                b.append(' ').append(s);
            }
            return b.toString();
        }

        /** The ticket's value parsed; null when it is not a description (a consumer abandoned the ticket). */
        static Published parse(String value) {
            if (value == null || value.equals(ABANDONED)) {
                return null;
            }
            String[] f = value.split(" ");
            try {
                int dims = Integer.parseInt(f[4]);
                if (f.length != 5 + dims) {
                    throw new IllegalStateException("a ticket has " + f.length + " fields for " + dims + " dims: '" + value + "'");
                }
                long[] shape = new long[dims];
                for (int d = 0; d < dims; d++) {
                    shape[d] = Long.parseLong(f[5 + d]);
                }
                ScalarType dtype = TorchTensors.ofCode(Integer.parseInt(f[3]));
                if (dtype == null) {
                    throw new IllegalStateException("a ticket names dtype code " + f[3] + ", unknown here: '" + value + "'");
                }
                return new Published(Integer.parseInt(f[0]), Long.parseLong(f[1]), Integer.parseInt(f[2]), dtype, shape);
            } catch (NumberFormatException | ArrayIndexOutOfBoundsException e) {
                throw new IllegalStateException("a ticket's value is not a description: '" + value + "'", e);
            }
        }

        long nbytes() {
            return ShmTensors.byteSize(shape, dtype);
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof Published p && p.producer == producer && p.serial == serial && p.getCount == getCount && p.dtype == dtype
                && Arrays.equals(p.shape, shape);
        }

        @Override
        public int hashCode() {
            return Long.hashCode(serial) * 31 + producer;
        }

        @Override
        public String toString() {
            return encode();
        }
    }

    /** A consumer's request that the producer send it the value of set {@code serial} of {@code key}, tagged {@code tag}. */
    record TakeRequest(long epoch, long serial, int consumer, int tag, String key) {
        String encode() {
            return epoch + " " + serial + " " + consumer + " " + tag + " " + key;
        }

        /** The request parsed; null for {@link #STOP}. */
        static TakeRequest parse(String line) {
            if (line.equals(STOP)) {
                return null;
            }
            String[] f = line.split(" ", 5);
            if (f.length != 5) {
                throw new IllegalStateException("a take request has " + f.length + " fields: '" + line + "'");
            }
            return new TakeRequest(Long.parseLong(f[0]), Long.parseLong(f[1]), Integer.parseInt(f[2]), Integer.parseInt(f[3]), f[4]);
        }
    }
}
