package org.dtorch.core.communication.group;

/**
 * How the Gloo backend fills an all-reduce's result buffer with the input before reducing it in place: with how many
 * threads per rank, and whether a first piece is reduced while the rest is still copied.
 * Both follow, by default, the processors' share of each rank that copies at once ({@link HostCopy#share}).
 *
 * @param copyThreads threads per rank for the copy; 0 (the default) takes the rank's share of the processors; a
 *                    positive number forces that many (still at most one per {@value HostCopy#MIN_SLICE_BYTES} bytes)
 * @param firstPiece  fraction of the bytes copied and reduced first, the rest copied while Gloo reduces the first
 *                    piece; {@link #AUTOMATIC} (the default) is {@value #DEFAULT_FIRST_PIECE} when the rank's share is at
 *                    least {@value #MIN_SHARE_TO_OVERLAP} processors and no overlap otherwise; 0 never overlaps
 *
 * <p>Thread-safe: immutable.
 */
record GlooCopyOptions(int copyThreads, double firstPiece) {
    /** System property: {@link #copyThreads}; default 0 (the processors' share). */
    static final String COPY_THREADS_PROPERTY = "dtorch.gloo.copyThreads";
    /** System property: {@link #firstPiece}, a number from 0 (no overlap) to below 1; default {@code auto}. */
    static final String FIRST_PIECE_PROPERTY = "dtorch.gloo.overlapFirstPiece";
    /** {@link #firstPiece} when the share of processors decides. */
    static final double AUTOMATIC = -1;
    /**
     * A quarter: while Gloo reduces it, the other three quarters are copied, at memory speed against Gloo's loopback
     * speed, so the copy is hidden but for the first quarter's. Only two pieces, since each piece costs a Gloo round.
     */
    static final double DEFAULT_FIRST_PIECE = 0.25;
    /**
     * Overlap needs a processor beside Gloo's: the rank's thread copies while Gloo's thread reduces. With fewer, the
     * two pieces only add a Gloo round (measured on 2 cores).
     */
    static final int MIN_SHARE_TO_OVERLAP = 2;
    /** All-reduces smaller than this are latency bound: one copy and one Gloo round, whatever the options say. */
    static final long MIN_OVERLAP_BYTES = 4L << 20;
    /** The first piece ends on a multiple of this many bytes (of every element size). */
    private static final long PIECE_ALIGNMENT = 4096;

    GlooCopyOptions {
        if (copyThreads < 0) {
            throw new IllegalArgumentException(COPY_THREADS_PROPERTY + " must be 0 (automatic) or a positive number of threads, got "
                + copyThreads);
        }
        if (firstPiece != AUTOMATIC && !(firstPiece >= 0 && firstPiece < 1)) {
            throw new IllegalArgumentException(FIRST_PIECE_PROPERTY + " must be 'auto' or at least 0 and below 1, got " + firstPiece);
        }
    }

    /** The options of this JVM's system properties. */
    static GlooCopyOptions fromSystemProperties() {
        return new GlooCopyOptions(copyThreadsProperty(), firstPieceProperty());
    }

    /**
     * Bytes of {@code bytes} to copy and reduce first, a multiple of {@value #PIECE_ALIGNMENT}, for a rank whose share
     * of the processors is {@code share}; 0 for one copy and one reduction (no overlap asked for or worth it, or an
     * all-reduce too small for a second Gloo round to pay).
     */
    long firstPieceBytes(long bytes, int share) {
        double fraction = firstPiece != AUTOMATIC ? firstPiece : share >= MIN_SHARE_TO_OVERLAP ? DEFAULT_FIRST_PIECE : 0;
        if (fraction == 0 || bytes < MIN_OVERLAP_BYTES) {
            return 0;
        }
        long first = (long) (bytes * fraction) / PIECE_ALIGNMENT * PIECE_ALIGNMENT;
        return first >= bytes ? 0 : first;
    }

    private static int copyThreadsProperty() {
        String text = System.getProperty(COPY_THREADS_PROPERTY);
        if (text == null || text.isBlank()) {
            return 0;
        }
        try {
            return Integer.parseInt(text.strip());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("system property " + COPY_THREADS_PROPERTY + " must be a whole number, got '" + text + "'", e);
        }
    }

    private static double firstPieceProperty() {
        String text = System.getProperty(FIRST_PIECE_PROPERTY);
        if (text == null || text.isBlank() || text.strip().equals("auto")) {
            return AUTOMATIC;
        }
        try {
            return Double.parseDouble(text.strip());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("system property " + FIRST_PIECE_PROPERTY + " must be 'auto' or a number, got '" + text + "'", e);
        }
    }
}
