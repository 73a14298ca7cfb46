// Command sarama-peer drives Shopify/sarama 1.22 (Debian's golang-github-shopify-sarama-dev)
// against a Kafka broker, for tests/broker/test_sarama.py.  sarama picks every request
// version from Config.Version alone (it sends no ApiVersions), so -version chooses how old a
// client the broker meets: 0.10.2.0 sends Produce v2 with magic 1 message sets, Fetch v3,
// Metadata v1, JoinGroup v1, OffsetCommit v1, CreateTopics v0, DescribeConfigs v0; 2.1.0.0
// sends Produce v3 (v2 batches), Fetch v4, Metadata v5, CreateTopics v2.
//
// Build in GOPATH mode against the Debian package (no module proxy needed):
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go build -o sarama-peer .
//
// Every subcommand writes one JSON object per line on stdout; sarama's own log goes to
// stderr.  A failure prints {"error": ..., "kerror": <Kafka error code if any>} and exits 1.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/Shopify/sarama"
)

var out = json.NewEncoder(os.Stdout)

func emit(v interface{}) {
	if err := out.Encode(v); err != nil {
		log.Fatalf("writing stdout: %v", err)
	}
}

// fail reports err (with its Kafka error code when it carries one) and exits.
func fail(context string, err error) {
	report := map[string]interface{}{"error": fmt.Sprintf("%s: %v", context, err)}
	if errs, ok := err.(sarama.ProducerErrors); ok && len(errs) > 0 {
		err = errs[0].Err
		report["error"] = fmt.Sprintf("%s: %d failed, first: %v", context, len(errs), err)
	}
	if kerr, ok := err.(sarama.KError); ok {
		report["kerror"] = int16(kerr)
	}
	emit(report)
	os.Exit(1)
}

type common struct {
	brokers  string
	version  string
	clientID string
	topic    string
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.brokers, "brokers", "127.0.0.1:9092", "bootstrap host:port list")
	fs.StringVar(&c.version, "version", "0.10.2.0", "sarama Config.Version (picks request versions)")
	fs.StringVar(&c.clientID, "client-id", "sarama-peer", "client.id sent in every request")
	fs.StringVar(&c.topic, "topic", "", "topic")
}

func (c *common) config() *sarama.Config {
	cfg := sarama.NewConfig()
	version, err := sarama.ParseKafkaVersion(c.version)
	if err != nil {
		fail("-version", err)
	}
	cfg.Version = version
	cfg.ClientID = c.clientID
	cfg.Metadata.Retry.Backoff = 100 * time.Millisecond
	return cfg
}

func (c *common) addrs() []string { return strings.Split(c.brokers, ",") }

func main() {
	log.SetFlags(0)
	if len(os.Args) < 2 {
		log.Fatal("usage: sarama-peer produce|consume|offsets|admin [flags]")
	}
	sarama.Logger = log.New(os.Stderr, "[sarama] ", log.Ltime|log.Lmicroseconds)
	cmd, args := os.Args[1], os.Args[2:]
	switch cmd {
	case "produce":
		produce(args)
	case "consume":
		consume(args)
	case "offsets":
		offsets(args)
	case "admin":
		admin(args)
	default:
		log.Fatalf("unknown command %q", cmd)
	}
}

// produce sends -n records with a SyncProducer (acks=all) in chunks of -chunk, so each
// request carries multi-record (compressed) batches; record i has key key-%06d, a distinct
// value and, when -timestamp-base > 0, timestamp base+i ms.
func produce(args []string) {
	var c common
	fs := flag.NewFlagSet("produce", flag.ExitOnError)
	c.register(fs)
	codec := fs.String("codec", "none", "none|gzip|snappy|lz4|zstd")
	start := fs.Int("start", 0, "index of the first record")
	n := fs.Int("n", 1000, "records to send")
	chunk := fs.Int("chunk", 200, "records per SendMessages call")
	tsBase := fs.Int64("timestamp-base", 0, "record i gets timestamp base+i ms (0: now)")
	idempotent := fs.Bool("idempotent", false, "Producer.Idempotent (needs version >= 0.11)")
	_ = fs.Parse(args)

	cfg := c.config()
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Flush.Frequency = 5 * time.Millisecond
	cfg.Producer.Flush.Messages = 50
	codecs := map[string]sarama.CompressionCodec{"none": sarama.CompressionNone,
		"gzip": sarama.CompressionGZIP, "snappy": sarama.CompressionSnappy,
		"lz4": sarama.CompressionLZ4, "zstd": sarama.CompressionZSTD}
	compression, ok := codecs[*codec]
	if !ok {
		fail("-codec", fmt.Errorf("unknown codec %q", *codec))
	}
	cfg.Producer.Compression = compression
	if *idempotent {
		cfg.Producer.Idempotent = true
		cfg.Net.MaxOpenRequests = 1
	}
	producer, err := sarama.NewSyncProducer(c.addrs(), cfg)
	if err != nil {
		fail("NewSyncProducer", err)
	}
	withHeaders := cfg.Version.IsAtLeast(sarama.V0_11_0_0)
	for first := *start; first < *start+*n; first += *chunk {
		last := first + *chunk
		if last > *start+*n {
			last = *start + *n
		}
		msgs := make([]*sarama.ProducerMessage, 0, last-first)
		for i := first; i < last; i++ {
			msg := &sarama.ProducerMessage{
				Topic: c.topic,
				Key:   sarama.StringEncoder(fmt.Sprintf("key-%06d", i)),
				Value: sarama.StringEncoder(fmt.Sprintf("value-%06d-%s", i, strings.Repeat("abcdefgh", i%5))),
			}
			if *tsBase > 0 {
				ms := *tsBase + int64(i)
				msg.Timestamp = time.Unix(ms/1000, (ms%1000)*int64(time.Millisecond))
			}
			if withHeaders {
				msg.Headers = []sarama.RecordHeader{{Key: []byte("seq"), Value: []byte(strconv.Itoa(i))}}
			}
			msgs = append(msgs, msg)
		}
		if err := producer.SendMessages(msgs); err != nil {
			fail("SendMessages", err)
		}
		for _, msg := range msgs {
			key, _ := msg.Key.Encode()
			ts := int64(-1) // left to sarama (the produce time)
			if !msg.Timestamp.IsZero() {
				ts = msg.Timestamp.UnixNano() / 1e6
			}
			emit(map[string]interface{}{"partition": msg.Partition, "offset": msg.Offset,
				"key": string(key), "timestamp": ts})
		}
	}
	if err := producer.Close(); err != nil {
		fail("Close", err)
	}
}

// groupHandler marks every message it reads until want have been read, then cancels.
type groupHandler struct {
	mu     sync.Mutex
	read   int
	want   int
	cancel context.CancelFunc
}

func (h *groupHandler) Setup(s sarama.ConsumerGroupSession) error {
	emit(map[string]interface{}{"session": s.GenerationID(), "member": s.MemberID(), "claims": s.Claims()})
	return nil
}

func (h *groupHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *groupHandler) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for msg := range claim.Messages() {
		h.mu.Lock()
		if h.read >= h.want { // read past the end: leave it for the next session
			h.mu.Unlock()
			continue
		}
		h.read++
		headers := map[string]string{}
		for _, hdr := range msg.Headers {
			headers[string(hdr.Key)] = string(hdr.Value)
		}
		emit(map[string]interface{}{"partition": msg.Partition, "offset": msg.Offset,
			"key": string(msg.Key), "value": string(msg.Value),
			"timestamp": msg.Timestamp.UnixNano() / 1e6, "headers": headers})
		s.MarkMessage(msg, "")
		if h.read == h.want {
			h.cancel()
		}
		h.mu.Unlock()
	}
	return nil
}

// consume joins -group, reads exactly -n records from -topic (from the oldest offset when the
// group has none committed), marks each and leaves; closing the group commits the marks
// (OffsetCommit v1 by default in sarama 1.22).  Group errors (failed commits included) fail.
func consume(args []string) {
	var c common
	fs := flag.NewFlagSet("consume", flag.ExitOnError)
	c.register(fs)
	group := fs.String("group", "sarama-peer", "consumer group id")
	n := fs.Int("n", 1000, "records to read before leaving")
	timeout := fs.Duration("timeout", 60*time.Second, "give up after this long")
	_ = fs.Parse(args)

	cfg := c.config()
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Return.Errors = true
	cfg.Consumer.Group.Rebalance.Retry.Backoff = 200 * time.Millisecond
	cg, err := sarama.NewConsumerGroup(c.addrs(), *group, cfg)
	if err != nil {
		fail("NewConsumerGroup", err)
	}
	var groupErrs []string // distinct errors, in order, with how often each came
	counts := map[string]int{}
	errsDone := make(chan struct{})
	go func() {
		for err := range cg.Errors() {
			log.Printf("group error: %v", err)
			if counts[err.Error()] == 0 {
				groupErrs = append(groupErrs, err.Error())
			}
			counts[err.Error()]++
		}
		close(errsDone)
	}()

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	h := &groupHandler{want: *n, cancel: cancel}
	for ctx.Err() == nil {
		if err := cg.Consume(ctx, []string{c.topic}, h); err != nil {
			fail("Consume", err)
		}
	}
	if err := cg.Close(); err != nil { // commits the last marks
		fail("Close", err)
	}
	<-errsDone
	if len(groupErrs) > 0 {
		for i, e := range groupErrs {
			groupErrs[i] = fmt.Sprintf("%s (x%d)", e, counts[e])
		}
		emit(map[string]interface{}{"error": "group errors: " + strings.Join(groupErrs, "; ")})
		os.Exit(1)
	}
	if h.read < h.want {
		emit(map[string]interface{}{"error": fmt.Sprintf("read %d of %d records in %v", h.read, h.want, *timeout)})
		os.Exit(1)
	}
}

// offsets asks ListOffsets (v1 from 0.10.1 on) for the first offset at or after each
// -times timestamp of -partition, and for the latest offset (-1).
func offsets(args []string) {
	var c common
	fs := flag.NewFlagSet("offsets", flag.ExitOnError)
	c.register(fs)
	partition := fs.Int("partition", 0, "partition")
	times := fs.String("times", "", "comma-separated timestamps (ms)")
	_ = fs.Parse(args)

	client, err := sarama.NewClient(c.addrs(), c.config())
	if err != nil {
		fail("NewClient", err)
	}
	defer client.Close()
	for _, field := range strings.Split(*times, ",") {
		ts, err := strconv.ParseInt(field, 10, 64)
		if err != nil {
			fail("-times", err)
		}
		offset, err := client.GetOffset(c.topic, int32(*partition), ts)
		if err != nil {
			fail(fmt.Sprintf("GetOffset(%d)", ts), err)
		}
		emit(map[string]interface{}{"partition": *partition, "timestamp": ts, "offset": offset})
	}
}

// admin creates -topic with -partitions and a retention.ms (CreateTopics v0 from 0.10.1, v1
// from 0.11, v2 from 1.0), then, from 0.11 on (sarama refuses it below), reads the topic's
// configs back with DescribeConfigs v0, the only version sarama 1.22 sends.
func admin(args []string) {
	var c common
	fs := flag.NewFlagSet("admin", flag.ExitOnError)
	c.register(fs)
	partitions := fs.Int("partitions", 3, "partitions of the new topic")
	retention := fs.String("retention-ms", "3600000", "retention.ms of the new topic")
	_ = fs.Parse(args)

	cfg := c.config()
	ca, err := sarama.NewClusterAdmin(c.addrs(), cfg)
	if err != nil {
		fail("NewClusterAdmin", err)
	}
	defer ca.Close()
	detail := &sarama.TopicDetail{NumPartitions: int32(*partitions), ReplicationFactor: 1,
		ConfigEntries: map[string]*string{"retention.ms": retention}}
	if err := ca.CreateTopic(c.topic, detail, false); err != nil {
		fail("CreateTopic", err)
	}
	emit(map[string]interface{}{"created": c.topic})
	if !cfg.Version.IsAtLeast(sarama.V0_11_0_0) {
		return
	}
	entries, err := ca.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: c.topic})
	if err != nil {
		fail("DescribeConfig", err)
	}
	configs := map[string]interface{}{}
	for _, e := range entries {
		configs[e.Name] = map[string]interface{}{"value": e.Value, "default": e.Default,
			"read_only": e.ReadOnly, "sensitive": e.Sensitive}
	}
	emit(map[string]interface{}{"configs": configs})
}
