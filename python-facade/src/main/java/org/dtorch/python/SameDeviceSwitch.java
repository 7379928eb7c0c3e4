package org.dtorch.python;

import java.util.Locale;
import java.util.Map;

/**
 * DTorch's single-device simulation switch, read from the environment: {@value #ENABLE} set to {@code 1} or
 * {@code true} runs every device of the mesh on one (the launcher's {@code --same-device}), with
 * {@value #DEVICES} simulated devices (default {@value #DEFAULT_DEVICES}). {@code 0}, {@code false} or an empty
 * value leave it off; anything else is refused before anything starts, naming the variable and the accepted forms.
 *
 * <p>Thread-safe: immutable.
 *
 * @param enabled whether the switch is on
 * @param devices how many devices to simulate when it is on
 */
record SameDeviceSwitch(boolean enabled, int devices) {
    /** Turns the simulation on: {@code 1} or {@code true} (any case). */
    static final String ENABLE = "DTORCH_DTENSOR_IN_SAME_DEVICE";
    /** How many devices the simulation runs. */
    static final String DEVICES = "DTORCH_NUM_GPU_WHEN_ENABLE_DTENSOR_IN_SAME_DEVICE";
    static final int DEFAULT_DEVICES = 8;

    static final SameDeviceSwitch OFF = new SameDeviceSwitch(false, 0);

    /**
     * The switch as {@code env} sets it.
     *
     * @throws IllegalArgumentException for a value of either variable that is not one of the accepted forms
     */
    static SameDeviceSwitch from(Map<String, String> env) {
        String enable = env.getOrDefault(ENABLE, "").strip().toLowerCase(Locale.ROOT);
        switch (enable) {
            case "", "0", "false" -> {
                return OFF;
            }
            case "1", "true" -> {
                return new SameDeviceSwitch(true, devices(env.get(DEVICES)));
            }
            default -> throw new IllegalArgumentException(ENABLE + "=" + env.get(ENABLE)
                + " is not understood: use 1 or true to simulate every device on one, 0 or false (or unset) for not");
        }
    }

    private static int devices(String value) {
        if (value == null || value.isBlank()) {
            return DEFAULT_DEVICES;
        }
        try {
            int count = Integer.parseInt(value.strip());
            if (count >= 1 && count <= Launcher.MAX_DEVICES) {
                return count;
            }
        } catch (NumberFormatException e) {
            // answered below, with the accepted range
        }
        throw new IllegalArgumentException(DEVICES + "=" + value + " is not a device count: expected a whole number from 1 to "
            + Launcher.MAX_DEVICES + " (default " + DEFAULT_DEVICES + ")");
    }
}
