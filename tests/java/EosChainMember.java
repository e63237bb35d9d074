// One member of a consume-transform-produce stage (tests/eos_chain.py) with Kafka's Java 4.x
// clients: transaction version 2 against a broker that finalized it (every commit bumps the
// epoch, and the next transaction's first write races the previous one's markers).
//
// usage: java -cp 'libs/*' EosChainMember.java BOOTSTRAP SRC DST GROUP TRANSACTIONAL_ID BATCH
//        ABORT_RATIO
// Per poll: begin, send every record to the same partition of DST, sendOffsetsToTransaction
// with the consumer's group metadata (KIP-447), commit (or, for a share ABORT_RATIO of the
// transactions, abort on purpose and rewind to the group's committed offsets). SIGTERM: finish the transaction, leave
// the group, exit 0. stdout: "RECORDS <n>" at the end, "FATAL <exception>" on a fatal error.
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class EosChainMember {
    // back to the group's committed offsets: the aborted records come again
    static void rewind(KafkaConsumer<byte[], byte[]> consumer) {
        for (TopicPartition tp : consumer.assignment()) {
            OffsetAndMetadata c = consumer.committed(java.util.Set.of(tp)).get(tp);
            consumer.seek(tp, c == null ? 0 : c.offset());
        }
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], src = args[1], dst = args[2], group = args[3], tid = args[4];
        int batch = Integer.parseInt(args[5]);
        double abortRatio = Double.parseDouble(args[6]);
        java.util.Random rnd = new java.util.Random(tid.hashCode());
        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cp.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, Integer.toString(batch));
        cp.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
        cp.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "1000");
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        pp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, tid);
        pp.put(ProducerConfig.LINGER_MS_CONFIG, "0");
        pp.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "10000");
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());

        AtomicBoolean stop = new AtomicBoolean(false);
        Thread main = Thread.currentThread();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            stop.set(true);
            try {
                main.join(30000);
            } catch (InterruptedException ignored) {
            }
        }));
        long done = 0;
        int code = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(cp);
             KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp)) {
            producer.initTransactions();
            consumer.subscribe(List.of(src));
            while (!stop.get()) {
                ConsumerRecords<byte[], byte[]> recs = consumer.poll(Duration.ofMillis(500));
                if (recs.isEmpty()) {
                    continue;
                }
                try {
                    producer.beginTransaction();
                    Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                    for (ConsumerRecord<byte[], byte[]> r : recs) {
                        producer.send(new ProducerRecord<>(dst, r.partition(), r.key(), r.value()));
                        offsets.put(new TopicPartition(r.topic(), r.partition()),
                                    new OffsetAndMetadata(r.offset() + 1));
                    }
                    producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                    if (rnd.nextDouble() < abortRatio) {
                        producer.abortTransaction();
                        rewind(consumer);
                        continue;
                    }
                    producer.commitTransaction();
                    done += recs.count();
                } catch (ProducerFencedException e) {
                    System.out.println("FATAL " + e);
                    code = 2;
                    break;
                } catch (KafkaException e) {
                    producer.abortTransaction();
                    rewind(consumer);
                }
            }
        } catch (KafkaException e) {
            System.out.println("FATAL " + e);
            code = 2;
        }
        System.out.println("RECORDS " + done);
        System.out.flush();
        if (code != 0) {
            System.exit(code);
        }
    }
}
