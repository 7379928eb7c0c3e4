package org.dtorch.polyglot;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.awt.image.BufferedImage;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import javax.imageio.ImageIO;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Line charts as PNG files, drawn off screen: what {@code dtorch.plot.line_chart} writes. */
class LineChartFileTest {
    private static final double[] STEPS = {0, 1, 2, 3, 4};

    @Test
    void shouldWriteAPngOfTheChartsSizeWithTheLinesDrawn(@TempDir Path dir) throws IOException {
        Path png = dir.resolve("loss.png");
        LineChartFile.write(png, "Training loss", "step", "loss", List.of(
            new LineChartFile.Series("4 devices", STEPS, new double[] {4, 2, 1, 0.5, 0.25}),
            new LineChartFile.Series("one device", STEPS, new double[] {4, 2.1, 1.1, 0.6, 0.3})), true);

        BufferedImage image = ImageIO.read(png.toFile());
        assertEquals(LineChartFile.WIDTH, image.getWidth());
        assertEquals(LineChartFile.HEIGHT, image.getHeight());
        Set<Integer> colours = new HashSet<>();
        for (int y = 0; y < image.getHeight(); y += 2) {
            for (int x = 0; x < image.getWidth(); x += 2) {
                colours.add(image.getRGB(x, y));
            }
        }
        assertTrue(colours.size() > 10, "a blank chart: " + colours.size() + " colours");
        try (var files = Files.list(dir)) {
            assertEquals(List.of(png), files.toList(), "the temporary file stayed");
        }
    }

    @Test
    void shouldRefuseBadSeriesBeforeWritingAnything(@TempDir Path dir) throws IOException {
        Path png = dir.resolve("loss.png");
        IllegalArgumentException uneven = assertThrows(IllegalArgumentException.class, () -> LineChartFile.write(png, "", "", "",
            List.of(new LineChartFile.Series("a", STEPS, new double[] {1, 2})), false));
        assertTrue(uneven.getMessage().contains("series 'a' has 5 x values but 2 y values"), uneven.getMessage());
        IllegalArgumentException notPositive = assertThrows(IllegalArgumentException.class, () -> LineChartFile.write(png, "", "", "",
            List.of(new LineChartFile.Series("b", new double[] {0, 1}, new double[] {1, 0})), true));
        assertTrue(notPositive.getMessage().contains("series 'b' point 1 (1.0, 0.0) cannot be drawn on a logarithmic y axis"),
            notPositive.getMessage());
        IllegalArgumentException nan = assertThrows(IllegalArgumentException.class, () -> LineChartFile.write(png, "", "", "",
            List.of(new LineChartFile.Series("c", new double[] {0}, new double[] {Double.NaN})), false));
        assertTrue(nan.getMessage().contains("series 'c' point 0"), nan.getMessage());
        IllegalArgumentException jpeg = assertThrows(IllegalArgumentException.class, () -> LineChartFile.write(dir.resolve("loss.jpg"),
            "", "", "", List.of(new LineChartFile.Series("d", STEPS, STEPS)), false));
        assertTrue(jpeg.getMessage().contains("must end in .png"), jpeg.getMessage());
        IllegalArgumentException nowhere = assertThrows(IllegalArgumentException.class, () -> LineChartFile.write(
            dir.resolve("missing").resolve("loss.png"), "", "", "", List.of(new LineChartFile.Series("e", STEPS, STEPS)), false));
        assertTrue(nowhere.getMessage().contains("does not exist"), nowhere.getMessage());
        try (var files = Files.list(dir)) {
            assertFalse(files.findAny().isPresent(), "something was written");
        }
    }
}
