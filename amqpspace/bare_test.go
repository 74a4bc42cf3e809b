package amqpspace_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/seed72275b23/agency-go/amqpspace"
)

// A bare amqp091-go client, written for the Raw benchmarks the way one
// would write it by hand with the guarantees amqpspace gives: every publish
// is mandatory and confirmed by the broker (an unroutable or refused
// message is an error, not a loss), and every delivery is acknowledged
// once it is handled. Where amqpspace pays for being general, it does not:
//
//   - Confirms are pipelined: publishers do not wait for each confirmation
//     in turn; a listener goroutine reads them as the broker sends them.
//   - Acknowledgements are batched: the one goroutine that reads a queue
//     acknowledges with multiple=true every bareAckBatch deliveries, and
//     whenever no delivery is ready.
//   - Messages are the same bytes on the wire as amqpspace's, encoded and
//     decoded with encoding/json into structs that know the message's
//     shape (no maps, no checks beyond what the handler needs).
//   - The requester and the responder publish and consume on channels of
//     their own.
//
// The exchange and queues are declared as amqpspace declares them: a
// durable topic exchange, durable queues with x-expires, consumed
// exclusively with amqpspace's default prefetch.

// bareAckBatch is how many deliveries a bare consumer acknowledges at once
// (at most; fewer when the queue runs dry): a quarter of the prefetch
// window, so that the broker never waits for an acknowledgement.
const bareAckBatch = amqpspace.DefaultPrefetch / 4

// bareMeta is the __meta__ object of the bare messages.
type bareMeta struct {
	ID       string `json:"id"`
	ParentID string `json:"parent_id,omitempty"`
	Deadline string `json:"deadline,omitempty"`
	NoReply  bool   `json:"no_reply,omitempty"`
}

// bareTick is a tick message as amqpspace puts it on the wire.
type bareTick struct {
	To     string `json:"to"`
	From   string `json:"from"`
	Action struct {
		Meta bareMeta  `json:"__meta__"`
		Tick benchTick `json:"tick"`
	} `json:"action"`
}

// barePing is a ping request as amqpspace puts it on the wire.
type barePing struct {
	To     string `json:"to"`
	From   string `json:"from"`
	Action struct {
		Meta bareMeta  `json:"__meta__"`
		Ping benchPing `json:"ping"`
	} `json:"action"`
}

// barePong is the response to a ping as amqpspace puts it on the wire.
type barePong struct {
	To     string `json:"to"`
	From   string `json:"from"`
	Action struct {
		Meta     bareMeta `json:"__meta__"`
		Response struct {
			Value int `json:"value"`
		} `json:"[response]"`
	} `json:"action"`
}

// bareIDs makes message ids shaped like amqpspace's: a fixed per-process
// prefix and a counter.
type bareIDs struct {
	prefix string
	n      atomic.Uint64
}

func (ids *bareIDs) next() string {
	var buf [40]byte
	b := append(buf[:0], ids.prefix...)
	return string(strconv.AppendUint(b, ids.n.Add(1), 36))
}

// rawBroker is the bare counterpart of a space: a publishing and a
// consuming connection, as amqpspace has, and an exchange of its own.
// Channels come from it; everything is closed when the benchmark ends, and
// its goroutines have returned by then.
type rawBroker struct {
	exchange         string
	pubConn, subConn *amqp.Connection
	ids              bareIDs
	wg               sync.WaitGroup // the goroutines of its consumers and listeners
}

func newRawBroker(b *testing.B) *rawBroker {
	b.Helper()
	url := brokerURL(b)
	r := &rawBroker{exchange: testExchange(b), ids: bareIDs{prefix: "0123456789abcdef-"}}
	var err error
	if r.pubConn, err = amqp.Dial(url); err != nil {
		b.Fatal(err)
	}
	if r.subConn, err = amqp.Dial(url); err != nil {
		_ = r.pubConn.Close()
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = r.subConn.Close()
		_ = r.pubConn.Close()
		r.wg.Wait()
	})
	ch := r.channel(b, r.pubConn)
	defer ch.Close()
	if err := ch.ExchangeDeclare(r.exchange, "topic", true, false, false, false, nil); err != nil {
		b.Fatal(err)
	}
	return r
}

func (r *rawBroker) channel(b *testing.B, conn *amqp.Connection) *amqp.Channel {
	b.Helper()
	ch, err := conn.Channel()
	if err != nil {
		b.Fatal(err)
	}
	return ch
}

// queue declares a queue as amqpspace declares an agent's, bound to the
// exchange with its own name, and deletes it when the benchmark ends.
func (r *rawBroker) queue(b *testing.B, name string) string {
	b.Helper()
	ch := r.channel(b, r.pubConn)
	defer ch.Close()
	args := amqp.Table{"x-expires": amqpspace.DefaultQueueExpiry.Milliseconds()}
	if _, err := ch.QueueDeclare(name, true, false, false, false, args); err != nil {
		b.Fatal(err)
	}
	if err := ch.QueueBind(name, name, r.exchange, false, nil); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		// Registered after the connections' cleanup, so it runs before it.
		if ch, err := r.pubConn.Channel(); err == nil {
			_, _ = ch.QueueDelete(name, false, false, false)
			_ = ch.Close()
		}
	})
	return name
}

// confirmer is a confirm-mode channel whose confirmations and returns a
// listener goroutine reads as they come. Publish is safe for concurrent
// use.
type confirmer struct {
	ch       *amqp.Channel
	exchange string

	nacked, returned atomic.Int64
}

// newConfirmer opens a confirm-mode channel on the publishing connection
// and starts its listener, which calls onConfirm (when not nil) for each
// confirmation, in publishing order, and onReturn (when not nil) for each
// returned message, before that message's confirmation.
func (r *rawBroker) newConfirmer(b *testing.B, onConfirm func(amqp.Confirmation), onReturn func(amqp.Return)) *confirmer {
	b.Helper()
	ch := r.channel(b, r.pubConn)
	if err := ch.Confirm(false); err != nil {
		b.Fatal(err)
	}
	c := &confirmer{ch: ch, exchange: r.exchange}
	// Buffered, as amqp091-go asks: the client library blocks its reader
	// until a confirmation is taken.
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, 2*amqpspace.DefaultPrefetch))
	returns := ch.NotifyReturn(make(chan amqp.Return, 16))
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for confirms != nil || returns != nil {
			select {
			case ret, ok := <-returns:
				if !ok {
					returns = nil
					continue
				}
				c.returned.Add(1)
				if onReturn != nil {
					onReturn(ret)
				}
			case conf, ok := <-confirms:
				if !ok {
					confirms = nil
					continue
				}
				if !conf.Ack {
					c.nacked.Add(1)
				}
				if onConfirm != nil {
					onConfirm(conf)
				}
			}
		}
	}()
	return c
}

// publish publishes body, mandatory, without waiting for its confirmation.
func (c *confirmer) publish(to, id string, body []byte) error {
	return c.ch.Publish(c.exchange, to, true, false, amqp.Publishing{
		ContentType:     "text/plain", // as amqpspace sends them
		ContentEncoding: "utf-8",
		MessageId:       id,
		Body:            body,
	})
}

// check fails b if the broker refused or returned a message.
func (c *confirmer) check(b *testing.B) {
	b.Helper()
	if n, r := c.nacked.Load(), c.returned.Load(); n > 0 || r > 0 {
		b.Fatalf("the broker refused %d messages and returned %d", n, r)
	}
}

// consume reads queue on a channel of its own on the consuming connection,
// exclusively, with amqpspace's default prefetch, and calls handle for each
// delivery in order on one goroutine; handle returning is the delivery
// being taken, after which it counts for the next batched acknowledgement.
// It runs until stop is called or the benchmark ends; stop returns once
// handle is no longer called.
func (r *rawBroker) consume(b *testing.B, queue string, handle func(d *amqp.Delivery)) (stop func()) {
	b.Helper()
	ch := r.channel(b, r.subConn)
	if err := ch.Qos(amqpspace.DefaultPrefetch, 0, false); err != nil {
		b.Fatal(err)
	}
	deliveries, err := ch.Consume(queue, "", false, true, false, false, nil)
	if err != nil {
		b.Fatal(err)
	}
	exited := make(chan struct{})
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer close(exited)
		var last uint64
		pending := 0
		ack := func() {
			if pending > 0 {
				_ = ch.Ack(last, true) // a failure ends the channel, and this loop with it
				pending = 0
			}
		}
		for {
			var d amqp.Delivery
			var ok bool
			select {
			case d, ok = <-deliveries:
			default:
				ack() // nothing is ready: acknowledge what has been taken
				d, ok = <-deliveries
			}
			if !ok {
				return
			}
			handle(&d)
			last = d.DeliveryTag
			if pending++; pending == bareAckBatch {
				ack()
			}
		}
	}()
	return func() {
		_ = ch.Close()
		<-exited
	}
}

// bareResponder answers pings on queue with handlers goroutines: the
// consumer hands each request over (and counts it as taken, as amqpspace
// does when its agent takes a message), a handler decodes it, skips it if
// its deadline has passed, and publishes the response on the responder's
// own confirm-mode channel without waiting for the confirmation.
func (r *rawBroker) bareResponder(b *testing.B, queue string, handlers int) *confirmer {
	pub := r.newConfirmer(b, nil, nil)
	work := make(chan []byte)
	stop := r.consume(b, queue, func(d *amqp.Delivery) { work <- d.Body })
	for range handlers {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			for body := range work {
				var req barePing
				if err := json.Unmarshal(body, &req); err != nil {
					b.Error(err)
					continue
				}
				if dl, err := time.Parse(time.RFC3339Nano, req.Action.Meta.Deadline); err != nil || !time.Now().Before(dl) {
					b.Errorf("ping %s: deadline %q passed or unreadable", req.Action.Meta.ID, req.Action.Meta.Deadline)
					continue
				}
				var resp barePong
				resp.To, resp.From = req.From, req.To
				resp.Action.Meta = bareMeta{ID: r.ids.next(), ParentID: req.Action.Meta.ID}
				resp.Action.Response.Value = req.Action.Ping.N
				out, err := json.Marshal(&resp)
				if err == nil {
					err = pub.publish(resp.To, resp.Action.Meta.ID, out)
				}
				if err != nil {
					b.Error(err)
				}
			}
		}()
	}
	b.Cleanup(func() {
		stop() // no more sends on work
		close(work)
	})
	return pub
}

// bareRequester sends pings and hands each response to the call waiting for
// it; its calls are safe for concurrent use.
type bareRequester struct {
	r        *rawBroker
	self, to string
	pub      *confirmer

	mu      sync.Mutex
	waiting map[string]chan bareResult // request id → its call
}

type bareResult struct {
	value int
	err   error
}

// newBareRequester consumes responses on queue self and sends to queue to.
func (r *rawBroker) newBareRequester(b *testing.B, self, to string) *bareRequester {
	q := &bareRequester{r: r, self: self, to: to, waiting: make(map[string]chan bareResult)}
	q.pub = r.newConfirmer(b, nil, func(ret amqp.Return) {
		q.settle(ret.MessageId, bareResult{err: fmt.Errorf("ping %s: unroutable", ret.MessageId)})
	})
	r.consume(b, self, func(d *amqp.Delivery) {
		var resp barePong
		if err := json.Unmarshal(d.Body, &resp); err != nil {
			b.Error(err)
			return
		}
		q.settle(resp.Action.Meta.ParentID, bareResult{value: resp.Action.Response.Value})
	})
	return q
}

// settle hands res to the call waiting for request id, if any.
func (q *bareRequester) settle(id string, res bareResult) {
	q.mu.Lock()
	ch := q.waiting[id]
	delete(q.waiting, id)
	q.mu.Unlock()
	if ch != nil {
		ch <- res
	}
}

// call sends Ping{N: n} with a deadline of timeout from now, made for the
// call, and waits for the response. The response is the proof of
// delivery: the confirmation of the request is not waited for (a refusal
// or a return still fails the call).
func (q *bareRequester) call(n int, timeout time.Duration) (int, error) {
	deadline := time.Now().Add(timeout)
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var req barePing
	req.To, req.From = q.to, q.self
	req.Action.Meta = bareMeta{ID: q.r.ids.next(), Deadline: deadline.UTC().Format(time.RFC3339Nano)}
	req.Action.Ping.N = n
	body, err := json.Marshal(&req)
	if err != nil {
		return 0, err
	}
	id := req.Action.Meta.ID
	ch := make(chan bareResult, 1)
	q.mu.Lock()
	q.waiting[id] = ch
	q.mu.Unlock()
	forget := func() {
		q.mu.Lock()
		delete(q.waiting, id)
		q.mu.Unlock()
	}
	dc, err := q.pub.ch.PublishWithDeferredConfirm(q.pub.exchange, q.to, true, false, amqp.Publishing{
		ContentType:     "text/plain", // as amqpspace sends them
		ContentEncoding: "utf-8",
		MessageId:       id,
		Body:            body,
	})
	if err != nil {
		forget()
		return 0, err
	}
	confirmed := dc.Done()
	for {
		select {
		case res := <-ch:
			return res.value, res.err
		case <-confirmed:
			if !dc.Acked() {
				forget()
				return 0, fmt.Errorf("ping %s: refused by the broker", id)
			}
			confirmed = nil
		case <-timer.C:
			forget()
			return 0, fmt.Errorf("ping %s: no response within %v", id, timeout)
		}
	}
}
