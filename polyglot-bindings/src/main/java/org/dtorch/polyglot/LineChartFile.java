package org.dtorch.polyglot;

import java.awt.BasicStroke;
import java.awt.Color;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.graalvm.polyglot.Value;
import org.knowm.xchart.BitmapEncoder;
import org.knowm.xchart.XYChart;
import org.knowm.xchart.XYChartBuilder;
import org.knowm.xchart.XYSeries;
import org.knowm.xchart.style.Styler;
import org.knowm.xchart.style.markers.SeriesMarkers;

/**
 * Writes a line chart of named series as a PNG file, drawn off screen with XChart (Java2D in headless mode, so no
 * display is needed): what {@code dtorch.plot.line_chart} and {@code train.py --plot} write. Every argument is checked
 * before anything is drawn; the file is written beside the target under a temporary name and moved into place, so it
 * appears complete or not at all.
 *
 * <p>Thread-safe: every call draws its own chart; AWT's headless mode is switched on once, before the first drawing.
 */
public final class LineChartFile {
    /** The chart's size in pixels. */
    public static final int WIDTH = 800;
    /** The chart's height in pixels. */
    public static final int HEIGHT = 500;

    /** Line colours in series order: a light blue under a dark orange, then further distinct hues. */
    private static final Color[] COLOURS = {new Color(0x8EC1E8), new Color(0xC0504D), new Color(0x4F8A3C), new Color(0x7A5BA6)};

    private LineChartFile() {
    }

    /**
     * One line: its legend name and its points, {@code x[i], y[i]}.
     *
     * <p>Thread-safe while its arrays stay unchanged: the record keeps the caller's arrays, not copies.
     */
    public record Series(String name, double[] x, double[] y) {
        /** Checks the points: as many x as y, at least one, finite, and positive y on a logarithmic axis. */
        void validate(boolean logY) {
            if (name == null || name.isBlank()) {
                throw new IllegalArgumentException("a series of the line chart has no name");
            }
            if (x.length != y.length) {
                throw new IllegalArgumentException("series '" + name + "' has " + x.length + " x values but " + y.length + " y values");
            }
            if (x.length == 0) {
                throw new IllegalArgumentException("series '" + name + "' has no points");
            }
            for (int i = 0; i < x.length; i++) {
                if (!Double.isFinite(x[i]) || !Double.isFinite(y[i]) || (logY && y[i] <= 0)) {
                    throw new IllegalArgumentException(String.format(Locale.ROOT, "series '%s' point %d (%s, %s) cannot be drawn%s",
                        name, i, x[i], y[i], logY ? " on a logarithmic y axis" : ""));
                }
            }
        }
    }

    /**
     * Draws {@code series} as lines on one chart and writes it to {@code path} (a {@code .png} file whose directory
     * exists); {@code logY} puts the y axis on a logarithmic scale.
     *
     * @throws IllegalArgumentException for no series, a series with no points or with non-finite values, or a path
     *         that is not a {@code .png} file in an existing directory; nothing is written then
     * @throws IOException when the file cannot be written
     */
    public static void write(Path path, String title, String xTitle, String yTitle, List<Series> series, boolean logY) throws IOException {
        Path target = path.toAbsolutePath();
        if (!target.getFileName().toString().toLowerCase(Locale.ROOT).endsWith(".png")) {
            throw new IllegalArgumentException("a line chart is written as PNG: the path must end in .png, got " + path);
        }
        if (!Files.isDirectory(target.getParent())) {
            throw new IllegalArgumentException("cannot write the line chart " + path + ": the directory " + target.getParent() + " does not exist");
        }
        if (series.isEmpty()) {
            throw new IllegalArgumentException("a line chart needs at least one series");
        }
        series.forEach(s -> s.validate(logY));
        byte[] png = BitmapEncoder.getBitmapBytes(chart(title, xTitle, yTitle, series, logY), BitmapEncoder.BitmapFormat.PNG);
        Path temporary = target.resolveSibling("." + target.getFileName() + ".tmp");
        Files.write(temporary, png);
        Files.move(temporary, target, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
    }

    /** {@link #write(Path, String, String, String, List, boolean)} of Python's {@code [[name, xs, ys], ...]}. */
    static void write(String path, String title, String xTitle, String yTitle, Value series, boolean logY) {
        List<Series> lines = new ArrayList<>();
        for (long i = 0; i < series.getArraySize(); i++) {
            Value s = series.getArrayElement(i);
            lines.add(new Series(s.getArrayElement(0).asString(), doubles(s.getArrayElement(1)), doubles(s.getArrayElement(2))));
        }
        try {
            write(Path.of(path), title, xTitle, yTitle, lines, logY);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write the line chart " + path + ": " + e.getMessage(), e);
        }
    }

    private static double[] doubles(Value v) {
        double[] out = new double[Math.toIntExact(v.getArraySize())];
        for (int i = 0; i < out.length; i++) {
            out[i] = BridgeArguments.asDouble(v.getArrayElement(i));
        }
        return out;
    }

    private static XYChart chart(String title, String xTitle, String yTitle, List<Series> series, boolean logY) {
        if (System.getProperty("java.awt.headless") == null) {
            // Scripts draw off screen; without this, Java2D looks for a display before the first chart.
            System.setProperty("java.awt.headless", "true");
        }
        XYChart chart = new XYChartBuilder().width(WIDTH).height(HEIGHT).title(title).xAxisTitle(xTitle).yAxisTitle(yTitle).build();
        chart.getStyler().setLegendPosition(Styler.LegendPosition.InsideNE);
        chart.getStyler().setYAxisLogarithmic(logY);
        chart.getStyler().setChartBackgroundColor(Color.WHITE);
        chart.getStyler().setMarkerSize(0);
        chart.getStyler().setXAxisTickMarkSpacingHint(90);
        chart.getStyler().setPlotGridVerticalLinesVisible(false);
        for (int i = 0; i < series.size(); i++) {
            Series s = series.get(i);
            XYSeries line = chart.addSeries(s.name(), s.x(), s.y());
            line.setMarker(SeriesMarkers.NONE);
            line.setLineColor(COLOURS[i % COLOURS.length]);
            // The first line wide and solid, the later ones thin and dashed over it: lines that coincide stay visible.
            line.setLineStyle(i == 0 ? new BasicStroke(4f, BasicStroke.CAP_ROUND, BasicStroke.JOIN_ROUND)
                : new BasicStroke(1.5f, BasicStroke.CAP_BUTT, BasicStroke.JOIN_ROUND, 10f, new float[] {6f, 4f}, 0f));
        }
        return chart;
    }
}
