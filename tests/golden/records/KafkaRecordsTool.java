// Cross-check tool for protocol/records.py against Apache Kafka's own record classes.
// Run with JDK 17+ as a single-file program, with Kafka's libs on the class path:
//   java -cp '<kafka>/libs/*' KafkaRecordsTool.java write <dir>    # Java-written batches
//   java -cp '<kafka>/libs/*' KafkaRecordsTool.java read <file>... # dump what Java reads
// The records written follow the same pattern as the librdkafka goldens (see README.md).
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HexFormat;

import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.record.internal.ControlRecordType;
import org.apache.kafka.common.record.internal.EndTransactionMarker;
import org.apache.kafka.common.record.internal.MemoryRecords;
import org.apache.kafka.common.record.internal.MemoryRecordsBuilder;
import org.apache.kafka.common.record.internal.MutableRecordBatch;
import org.apache.kafka.common.record.internal.Record;
import org.apache.kafka.common.record.internal.RecordBatch;
import org.apache.kafka.common.record.internal.SimpleRecord;

public class KafkaRecordsTool {
    static final HexFormat HEX = HexFormat.of();

    static String hex(ByteBuffer b) {
        if (b == null) return "-";
        byte[] a = new byte[b.remaining()];
        b.duplicate().get(a);
        return "x" + HEX.formatHex(a);
    }

    static byte[] bytes(String s) {
        return s.getBytes(java.nio.charset.StandardCharsets.UTF_8);
    }

    static SimpleRecord pattern(int i) {
        Header[] headers = i % 3 == 0
            ? new Header[] {new RecordHeader("h", bytes("hv" + i)), new RecordHeader("nullh", (byte[]) null)}
            : new Header[0];
        byte[] key = i % 4 == 1 ? null : bytes("key-" + i);
        byte[] value = null;
        if (i != 7) {
            String v = "value " + i + " ";
            value = bytes(v.repeat(i + 3));
        }
        return new SimpleRecord(1700000000000L + 7L * i, key, value, headers);
    }

    static void write(Path dir) throws Exception {
        String[] codecs = {"none", "gzip", "snappy", "lz4", "zstd"};
        for (String codec : codecs) {
            MemoryRecordsBuilder b = MemoryRecords.builder(ByteBuffer.allocate(1 << 16),
                Compression.of(codec).build(), TimestampType.CREATE_TIME, 0L);
            for (int i = 0; i < 20; i++) b.append(pattern(i));
            MemoryRecords r = b.build();
            Files.write(dir.resolve("java_" + codec + ".bin"), toBytes(r.buffer()));
        }
        MemoryRecords marker = MemoryRecords.withEndTransactionMarker(
            5L, 1700000000999L, 11, 42L, (short) 3, new EndTransactionMarker(ControlRecordType.COMMIT, 7));
        Files.write(dir.resolve("java_commit_marker.bin"), toBytes(marker.buffer()));
    }

    static byte[] toBytes(ByteBuffer buf) {
        byte[] a = new byte[buf.remaining()];
        buf.duplicate().get(a);
        return a;
    }

    static void read(String file) throws Exception {
        MemoryRecords records = MemoryRecords.readableRecords(ByteBuffer.wrap(Files.readAllBytes(Path.of(file))));
        for (MutableRecordBatch batch : records.batches()) {
            batch.ensureValid();
            System.out.println("BATCH " + batch.baseOffset() + " " + batch.lastOffset() + " " + batch.countOrNull()
                + " " + batch.compressionType().id + " " + batch.timestampType().id + " " + batch.isTransactional()
                + " " + batch.isControlBatch() + " " + batch.producerId() + " " + batch.producerEpoch()
                + " " + batch.baseSequence() + " " + batch.partitionLeaderEpoch() + " " + batch.maxTimestamp());
            for (Record r : batch) {
                StringBuilder sb = new StringBuilder("REC " + r.offset() + " " + r.timestamp() + " "
                    + hex(r.key()) + " " + hex(r.value()));
                for (Header h : r.headers()) {
                    sb.append(" ").append(h.key()).append("=")
                      .append(h.value() == null ? "-" : "x" + HEX.formatHex(h.value()));
                }
                System.out.println(sb);
                if (batch.isControlBatch()) {
                    ControlRecordType type = ControlRecordType.parse(r.key());
                    String epoch = "-";
                    if (type == ControlRecordType.ABORT || type == ControlRecordType.COMMIT)
                        epoch = Integer.toString(EndTransactionMarker.deserialize(r).coordinatorEpoch());
                    System.out.println("CTRL " + type.type() + " " + epoch);
                }
            }
        }
        System.out.println("END");
    }

    public static void main(String[] args) throws Exception {
        if (args[0].equals("write")) {
            write(Path.of(args[1]));
        } else {
            for (int i = 1; i < args.length; i++) read(args[i]);
        }
    }
}
