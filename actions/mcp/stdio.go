package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultMaxFrameBytes bounds one JSON-RPC frame (one line) on stdio:
// go-sdk's DefaultMaxLineLength, 16 MiB.
const DefaultMaxFrameBytes = sdk.DefaultMaxLineLength

// StdioTransport is the transport of an MCP server that a client starts
// as a command: newline-delimited JSON-RPC on In and Out. Unlike go-sdk's
// StdioTransport, which ends the session at the first frame it cannot
// read, it answers a frame that is not JSON (-32700, parse error), not a
// JSON-RPC message (-32600) or over MaxFrameBytes (-32600, without holding
// more of it than the limit; for the request's id when its first or last
// 4 KiB show it, so that the client's call ends) with an error response,
// and goes on serving.
type StdioTransport struct {
	In            io.Reader
	Out           io.Writer
	MaxFrameBytes int // 0: DefaultMaxFrameBytes
}

// Stdio returns a StdioTransport on the process's stdin and stdout.
func Stdio() *StdioTransport { return &StdioTransport{In: os.Stdin, Out: os.Stdout} }

// Connect implements go-sdk's Transport.
func (t *StdioTransport) Connect(context.Context) (sdk.Connection, error) {
	limit := t.MaxFrameBytes
	if limit <= 0 {
		limit = DefaultMaxFrameBytes
	}
	c := &stdioConn{out: t.Out, frames: make(chan frame), done: make(chan struct{})}
	go c.readLoop(bufio.NewReaderSize(t.In, 64<<10), limit)
	return c, nil
}

type frame struct {
	msg jsonrpc.Message
	err error
}

type stdioConn struct {
	out     io.Writer
	writeMu sync.Mutex
	frames  chan frame
	done    chan struct{}
	close   sync.Once
}

// readLoop reads frames until In ends, answering the unreadable ones
// itself.
func (c *stdioConn) readLoop(r *bufio.Reader, limit int) {
	for {
		line, over, err := readLine(r, limit)
		if len(bytes.TrimSpace(line)) > 0 || over {
			if msg, ok := c.decode(line, over, limit); ok {
				select {
				case c.frames <- frame{msg: msg}:
				case <-c.done:
					return
				}
			}
		}
		if err != nil {
			select {
			case c.frames <- frame{err: err}:
			case <-c.done:
			}
			return
		}
	}
}

// edge is how much of a frame's start and end readLine keeps of a frame
// over the limit, to find its id in.
const edge = 4 << 10

// readLine reads one line, keeping at most limit bytes of it: over
// reports a line that was longer, whose rest is read and dropped; of such
// a line, line holds its first edge bytes, then a newline, then its last
// edge bytes (where a request's id is: at the start, or, as the
// TypeScript SDK writes it, at the end).
func readLine(r *bufio.Reader, limit int) (line []byte, over bool, err error) {
	var tail []byte
	for {
		chunk, err := r.ReadSlice('\n')
		switch {
		case !over && len(line)+len(chunk) > limit:
			over = true
			tail = append(append(tail, line[len(line)-min(len(line), edge):]...), chunk...)
			line = append([]byte(nil), line[:min(len(line), edge)]...)
			if len(line) < edge {
				line = append(line, chunk[:min(len(chunk), edge-len(line))]...)
			}
		case over:
			tail = append(tail, chunk...)
		default:
			line = append(line, chunk...)
		}
		if len(tail) > 2*edge {
			tail = append(tail[:0], tail[len(tail)-edge:]...)
		}
		if err != bufio.ErrBufferFull {
			if over {
				tail = tail[len(tail)-min(len(tail), edge):]
				line = append(append(line, '\n'), tail...)
			}
			return line, over, err
		}
	}
}

// tailID matches a request id written last in a frame: "id": a number or
// a string, perhaps "jsonrpc": "2.0" after it, and the frame's end.
var tailID = regexp.MustCompile(`"id"\s*:\s*(-?[0-9]+|"(?:[^"\\]|\\.)*")\s*(?:,\s*"jsonrpc"\s*:\s*"2\.0"\s*)?}\s*$`)

// frameID returns the id of a request over the limit, from what readLine
// kept of it (its start, a newline, its end), or nil when it cannot tell.
// At the start, the members before params are read as JSON; at the end,
// the id must be the object's last member (or be followed by jsonrpc
// only), so that an "id" inside params is never taken for it.
func frameID(kept []byte) json.RawMessage {
	head, tail, _ := bytes.Cut(kept, []byte("\n"))
	dec := json.NewDecoder(bytes.NewReader(head))
	if tok, err := dec.Token(); err == nil && tok == json.Delim('{') {
		for dec.More() {
			key, err := dec.Token()
			if err != nil {
				break
			}
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				break // a member cut off by the edge: the id, if anywhere, is at the end
			}
			if key == "id" && validID(v) {
				return v
			}
		}
	}
	if m := tailID.FindSubmatch(tail); m != nil && validID(m[1]) {
		return json.RawMessage(m[1])
	}
	return nil
}

// validID reports whether v is a JSON-RPC id: a number or a string.
func validID(v json.RawMessage) bool {
	var id any
	if json.Unmarshal(v, &id) != nil {
		return false
	}
	switch id.(type) {
	case float64, string:
		return true
	}
	return false
}

// decode reads one frame, or answers it with an error and reports false.
func (c *stdioConn) decode(line []byte, over bool, limit int) (jsonrpc.Message, bool) {
	if over {
		c.writeError(frameID(line), -32600, fmt.Sprintf("invalid request: a frame of more than %d bytes was dropped unread; send less", limit))
		return nil, false
	}
	line = bytes.TrimSpace(line)
	if !json.Valid(line) {
		c.writeError(nil, jsonrpc.CodeParseError, "parse error: the frame is not JSON; each line must be one JSON-RPC message")
		return nil, false
	}
	msg, err := jsonrpc.DecodeMessage(line)
	if err != nil {
		var probe struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.Unmarshal(line, &probe)
		c.writeError(probe.ID, -32600, "invalid request: not a JSON-RPC 2.0 message: "+err.Error())
		return nil, false
	}
	return msg, true
}

// writeError writes an error response with the given id (null when nil).
func (c *stdioConn) writeError(id json.RawMessage, code int, text string) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id, Error: struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{code, text}})
	if err != nil {
		return
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	_, _ = c.out.Write(append(b, '\n'))
}

func (c *stdioConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case f := <-c.frames:
		return f.msg, f.err
	case <-c.done:
		return nil, io.EOF
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *stdioConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return err
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	select {
	case <-c.done:
		return errors.New("mcp: the connection is closed")
	default:
	}
	_, err = c.out.Write(append(b, '\n'))
	return err
}

func (c *stdioConn) Close() error {
	c.close.Do(func() { close(c.done) })
	return nil
}

func (c *stdioConn) SessionID() string { return "" }
