package main

import (
	"fmt"
	"net"

	"github.com/spf13/cobra"

	"github.com/seed72275b23/agency-go/actions/mcp"
)

func newMCPCmd(o *options) *cobra.Command {
	var addr string
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve the space's actions to an MCP client, on stdio or over HTTP",
		Long: `mcp joins the space as an agent and serves, as MCP tools, the actions of the
space's agents that this agent may call: each tool is named Agent.action, with
the action's argument schema as its input schema. A tool call is a request in
the space; its errors come back as tool results with isError set and the text
the space gives. The tools follow the agents that join and leave.

By default it speaks MCP on stdin and stdout, for a client that starts it as a
command (Claude Desktop, an IDE); logs go to stderr only. With --http it serves
streamable HTTP at /mcp on that address instead (loopback only: a listener
beyond this host needs a token check, which this command does not offer).

MCP clients pass a command few environment variables: give the broker with
--amqp-url, or in the client's "env" entry (AMQP_URL).`,
		Example: `  agency mcp
  agency --demo mcp
  agency mcp --http 127.0.0.1:8931`,
		Args: argsUsage(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			if addr != "" {
				host, _, err := net.SplitHostPort(addr)
				if err != nil {
					return usageError("--http %q: %v", addr, err)
				}
				if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
					return usageError("--http %q: serve on a loopback address (127.0.0.1); beyond this host a server needs a token check (use package actions/mcp with mcp.BearerToken)", addr)
				}
			}
			id, err := o.agentID()
			if err != nil {
				return err
			}
			srv, err := mcp.NewServer(id)
			if err != nil {
				return err
			}
			s, err := o.join(cmd.Context(), srv.Agent())
			if err != nil {
				return err
			}
			defer s.close()
			if addr == "" {
				return srv.Run(cmd.Context(), mcp.Stdio())
			}
			err = srv.ListenAndServe(cmd.Context(), addr, func(a net.Addr) {
				fmt.Fprintf(o.stderr, "serving MCP at http://%s%s\n", a, mcp.Path)
			})
			if cmd.Context().Err() != nil {
				return nil // interrupted
			}
			return err
		},
	}
	cmd.Flags().StringVar(&addr, "http", "", "serve streamable HTTP at /mcp on this loopback address, instead of stdio")
	return cmd
}
