// The issue-11 loop with Kafka's Java producer (4.x: transaction version 2 against a broker
// that finalized it): per round "begin, send one record, commit; begin, send one record (and
// wait for its ack), abort", with no pause between EndTxn and the next send.
//
// usage: java -cp 'libs/*' EosLoop.java BOOTSTRAP TOPIC TRANSACTIONAL_ID ROUNDS
// stdout: one line "ERROR <round> <commit|abort|send> <exception class>: <message>" per failed
// step (a fatal one ends the loop), then "DONE <rounds run> <errors>".
import java.util.Properties;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.StringSerializer;

public class EosLoop {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], tid = args[2];
        int rounds = Integer.parseInt(args[3]);
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, tid);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        int errors = 0, done = 0;
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            producer.initTransactions();
            for (int i = 0; i < rounds; i++) {
                String step = "send";
                try {
                    producer.beginTransaction();
                    producer.send(new ProducerRecord<>(topic, 0, null, "c" + i));
                    step = "commit";
                    producer.commitTransaction();
                    producer.beginTransaction();
                    step = "send";
                    producer.send(new ProducerRecord<>(topic, 0, null, "a" + i)).get();
                    step = "abort";
                    producer.abortTransaction();
                    done = i + 1;
                } catch (ProducerFencedException | OutOfOrderSequenceException
                         | AuthorizationException e) {
                    errors++;
                    System.out.println("ERROR " + i + " " + step + " " + e);
                    break;
                } catch (KafkaException | java.util.concurrent.ExecutionException e) {
                    errors++;
                    System.out.println("ERROR " + i + " " + step + " " + e);
                    try {
                        producer.abortTransaction();
                    } catch (KafkaException fatal) {
                        System.out.println("ERROR " + i + " abort " + fatal);
                        break;
                    }
                }
            }
        }
        System.out.println("DONE " + done + " " + errors);
    }
}
