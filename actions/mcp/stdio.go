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
// more of it than the limit) with an error response, and goes on serving.
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

// readLine reads one line, keeping at most limit bytes of it: over
// reports a line that was longer (its rest is read and dropped).
func readLine(r *bufio.Reader, limit int) (line []byte, over bool, err error) {
	for {
		chunk, err := r.ReadSlice('\n')
		if !over {
			if len(line)+len(chunk) > limit {
				over, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if err != bufio.ErrBufferFull {
			return line, over, err
		}
	}
}

// decode reads one frame, or answers it with an error and reports false.
func (c *stdioConn) decode(line []byte, over bool, limit int) (jsonrpc.Message, bool) {
	if over {
		c.writeError(nil, -32600, fmt.Sprintf("invalid request: a frame of more than %d bytes was dropped unread; send less", limit))
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
