// Kafka's Java consumer (kafka-clients 4.x, KIP-227 fetch sessions on by default) through many
// rounds of incremental fetches: it assigns partitions of TOPIC, and each round a producer writes
// one record to a few of them, which the consumer must read exactly once, in order. Every ROUNDS/4
// rounds the assignment changes (partitions added and removed: the fetch session adds and forgets
// them). After phase 1 it prints "PAUSE" and waits for a line on stdin (the test restarts the
// broker meanwhile, so the consumer's session id is stale), then runs phase 2 the same way,
// prints "PAUSE" again and waits for a line before it closes (closing ends its fetch session).
//
// usage: java -cp 'libs/*' FetchSessionConsumer.java BOOTSTRAP TOPIC PARTITIONS ROUNDS
// stdout: "PAUSE" (twice), then "DONE <records consumed> <errors>"; "ERROR <text>" per problem.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class FetchSessionConsumer {
    static int errors = 0, consumed = 0;
    static final Map<Integer, Long> sent = new HashMap<>();  // partition -> records sent
    static final Map<Integer, Long> seen = new HashMap<>();  // partition -> next expected value

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1];
        int partitions = Integer.parseInt(args[2]), rounds = Integer.parseInt(args[3]);
        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cp.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        pp.put(ProducerConfig.ACKS_CONFIG, "all");
        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in));
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp);
             KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
            for (int phase = 0; phase < 2; phase++) {
                for (int r = 0; r < rounds; r++) {
                    List<TopicPartition> assigned = assignment(topic, partitions, phase * 4 + r * 4 / rounds);
                    if (!new HashSet<>(assigned).equals(consumer.assignment())) {
                        consumer.assign(assigned);  // no group: continue where we were
                        for (TopicPartition tp : assigned) {
                            consumer.seek(tp, seen.getOrDefault(tp.partition(), 0L));
                        }
                    }
                    round(consumer, producer, topic, assigned, r);
                }
                System.out.println("PAUSE");
                System.out.flush();
                stdin.readLine();
            }
        }
        System.out.println("DONE " + consumed + " " + errors);
    }

    /** A sliding window of half the partitions: step k holds [k, k + partitions/2). */
    static List<TopicPartition> assignment(String topic, int partitions, int step) {
        List<TopicPartition> out = new ArrayList<>();
        for (int i = 0; i < partitions / 2; i++) {
            out.add(new TopicPartition(topic, (step * 3 + i) % partitions));
        }
        return out;
    }

    static void round(KafkaConsumer<String, String> consumer, KafkaProducer<String, String> producer,
                      String topic, List<TopicPartition> assigned, int r) throws Exception {
        // one record to two of the assigned partitions (the others stay idle)
        Map<Integer, Long> want = new HashMap<>();
        for (int k = 0; k < 2; k++) {
            int p = assigned.get((r + k * 5) % assigned.size()).partition();
            long n = sent.getOrDefault(p, 0L);
            producer.send(new ProducerRecord<>(topic, p, null, Long.toString(n))).get();
            sent.put(p, n + 1);
        }
        for (TopicPartition tp : assigned) {
            want.put(tp.partition(), sent.getOrDefault(tp.partition(), 0L));
        }
        long deadline = System.currentTimeMillis() + 60000;
        while (!caughtUp(want) && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<String, String> rec : consumer.poll(Duration.ofMillis(200))) {
                long expected = seen.getOrDefault(rec.partition(), 0L);
                long value = Long.parseLong(rec.value());
                if (value != expected) {
                    errors++;
                    System.out.println("ERROR partition " + rec.partition() + " offset " + rec.offset()
                        + ": value " + value + ", expected " + expected);
                }
                seen.put(rec.partition(), value + 1);
                consumed++;
            }
        }
        if (!caughtUp(want)) {
            errors++;
            System.out.println("ERROR round " + r + ": not caught up: want " + want + " seen " + seen);
        }
    }

    static boolean caughtUp(Map<Integer, Long> want) {
        for (Map.Entry<Integer, Long> e : want.entrySet()) {
            if (seen.getOrDefault(e.getKey(), 0L) < e.getValue()) {
                return false;
            }
        }
        return true;
    }
}
