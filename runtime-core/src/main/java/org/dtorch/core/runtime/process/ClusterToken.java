package org.dtorch.core.runtime.process;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.InvalidKeyException;
import java.security.NoSuchAlgorithmException;
import java.util.Map;
import java.util.Optional;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import org.dtorch.core.shm.OwnedPaths;

/**
 * The secret the nodes of one run share, from which {@link ControlHandshake} proves on every control connection that
 * both ends belong to the run. It comes from a token file (checked like the runtime's other private files: a regular
 * file of this user that group and others cannot access) or from the {@value #ENV} environment variable; surrounding
 * whitespace (a file's last newline) is not part of it. Its bytes never leave this object: it only keys MACs, and
 * {@link #toString} names where it came from, not what it is.
 *
 * <p>Thread-safe: immutable.
 */
public final class ClusterToken {
    /** The environment variable holding the token when no token file is given. */
    public static final String ENV = "DTORCH_TOKEN";
    /** The shortest token accepted, in UTF-8 bytes: a short secret is guessed offline from one recorded handshake. */
    public static final int MIN_BYTES = 16;
    static final String MAC_ALGORITHM = "HmacSHA256";

    private final SecretKeySpec key;
    private final String source;

    private ClusterToken(byte[] bytes, String source) {
        this.key = new SecretKeySpec(bytes, MAC_ALGORITHM);
        this.source = source;
    }

    /**
     * The token of a run of {@code nodes} nodes: read from {@code tokenFile} if one is given, else from {@value #ENV}
     * in {@code environment}; none for a run of one node that was given neither.
     *
     * @throws IllegalArgumentException if a run of more than one node was given neither, or the token is too short
     * @throws org.dtorch.core.shm.UnsafePathException if the token file is not private to this user
     */
    public static Optional<ClusterToken> resolve(int nodes, Path tokenFile, Map<String, String> environment) {
        if (tokenFile != null) {
            return Optional.of(fromFile(tokenFile));
        }
        String value = environment.get(ENV);
        if (value != null) {
            return Optional.of(of(value, "the environment variable " + ENV));
        }
        if (nodes > 1) {
            throw new IllegalArgumentException("a run of " + nodes + " nodes needs a shared token to authenticate its control "
                + "connections: set the environment variable " + ENV + " or pass --token-file FILE (a file of mode 0600), with "
                + "the same token of at least " + MIN_BYTES + " bytes on every node");
        }
        return Optional.empty();
    }

    /**
     * The token held in {@code file}.
     *
     * @throws org.dtorch.core.shm.UnsafePathException if the file is not a regular file of this user, or group or others
     *                                                 have access to it
     * @throws IllegalArgumentException                if the token is too short
     */
    public static ClusterToken fromFile(Path file) {
        OwnedPaths.checkPrivateFile(file, "token file", "Make it private with chmod 600 " + file + ".");
        try {
            return of(Files.readString(file, StandardCharsets.UTF_8), "the token file " + file);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read the token file " + file, e);
        }
    }

    /**
     * The token {@code value}; {@code source} says where it came from, for messages.
     *
     * @throws IllegalArgumentException if the token, without surrounding whitespace, has fewer than {@value #MIN_BYTES}
     *                                  bytes
     */
    public static ClusterToken of(String value, String source) {
        byte[] bytes = value.strip().getBytes(StandardCharsets.UTF_8);
        if (bytes.length < MIN_BYTES) {
            throw new IllegalArgumentException("the token from " + source + " has " + bytes.length + " bytes, at least " + MIN_BYTES
                + " are needed (for example: openssl rand -hex 32)");
        }
        return new ClusterToken(bytes, source);
    }

    /** A fresh HMAC-SHA256 keyed with the token. */
    Mac newMac() {
        try {
            Mac mac = Mac.getInstance(MAC_ALGORITHM);
            mac.init(key);
            return mac;
        } catch (NoSuchAlgorithmException | InvalidKeyException e) {
            throw new IllegalStateException("this JDK cannot compute " + MAC_ALGORITHM, e);
        }
    }

    /**
     * Puts the token into {@code environment} under {@value #ENV}: how a worker process this one starts gets it (the
     * environment of a process is readable by its user only, unlike its command line).
     */
    void exportTo(Map<String, String> environment) {
        environment.put(ENV, new String(key.getEncoded(), StandardCharsets.UTF_8));
    }

    /** Where the token came from; never the token. */
    @Override
    public String toString() {
        return "token from " + source;
    }
}
