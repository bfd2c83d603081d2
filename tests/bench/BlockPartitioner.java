import java.util.Map;
import org.apache.kafka.clients.producer.Partitioner;
import org.apache.kafka.common.Cluster;

/**
 * Loads a bench's source topic evenly and fast: the n-th record sent goes to
 * partition (n / block.records) mod partitions, so every partition gets its
 * share in runs of consecutive records. Round-robin spread the records as
 * evenly but cut every batch to a record or two, and a source broker took
 * over 10 minutes to load 2M records into 5,000 partitions that way; the
 * default (sticky) partitioner left most of them empty. Used with
 * ProducerPerformance, which sends from one thread, so the order is the
 * send order.
 */
public class BlockPartitioner implements Partitioner {
  private long block = 1;
  private long sent = 0;

  @Override
  public void configure(Map<String, ?> configs) {
    Object value = configs.get("block.records");
    if (value != null) {
      block = Math.max(1, Long.parseLong(value.toString()));
    }
  }

  @Override
  public int partition(
      String topic, Object key, byte[] keyBytes, Object value, byte[] valueBytes, Cluster cluster) {
    int partitions = cluster.partitionsForTopic(topic).size();
    return (int) ((sent++ / block) % partitions);
  }

  @Override
  public void close() {}
}
