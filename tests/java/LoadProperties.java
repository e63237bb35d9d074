import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Properties;
import java.util.TreeMap;

/**
 * Reads each file named on the command line with java.util.Properties.load(InputStream), as
 * Kafka's Utils.loadProps reads server.properties, and prints one line per file: the keys and
 * values as \\uXXXX-escaped ASCII, key and value separated by \t, entries by \u0001, so that
 * the test can compare them with kafkawire's reader exactly.
 */
public class LoadProperties {
    static String escape(String s) {
        StringBuilder b = new StringBuilder();
        for (char c : s.toCharArray()) {
            if (c >= 0x20 && c < 0x7f && c != '\\') b.append(c);
            else b.append(String.format("\\u%04x", (int) c));
        }
        return b.toString();
    }

    public static void main(String[] args) throws Exception {
        for (String path : args) {
            Properties p = new Properties();
            try (InputStream in = Files.newInputStream(Paths.get(path))) {
                p.load(in);
            }
            StringBuilder line = new StringBuilder();
            for (var e : new TreeMap<>(p).entrySet()) {
                if (line.length() > 0) line.append('\u0001');
                line.append(escape((String) e.getKey())).append('\t')
                    .append(escape((String) e.getValue()));
            }
            System.out.println(line);
        }
    }
}
