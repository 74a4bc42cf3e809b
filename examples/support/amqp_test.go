package main

import (
	"syscall"
	"testing"

	"github.com/seed72275b23/agency-go/actions/openai/openaitest"
	"github.com/seed72275b23/agency-go/amqpspace/amqptest"
)

// The program as two processes on RabbitMQ: the customer's (Triage and
// the user) and the operator's (Sales, Refunds, Human and the shop), each
// on its own terminal. Each prints the handoffs its agents make.
func TestTwoProcesses(t *testing.T) {
	url := amqptest.URL(t)
	ex := amqptest.Exchange(t)
	bin := build(t)
	dir := t.TempDir()
	srv := openaitest.NewServer(t,
		step(t, triageID, text("I can help with that! What is it about?")),
		step(t, triageID, call("transfer_to_issues_and_repairs", "{}")),
		step(t, refundsID, text("What is wrong with the shoes?")),
		step(t, refundsID, call("transfer_back_to_triage", "{}")),
		step(t, triageID, call("escalate_to_human", "{}")),
	)
	env := []string{"OPENAI_BASE_URL=" + srv.URL, "OPENAI_API_KEY=test-key", "AMQP_URL=" + url}
	operator := start(t, bin, dir, env, "-amqp", "-exchange", ex, "-only", "Sales,Refunds,Human,Shop")
	operator.stderr.waitFor(t, "serving")
	customer := start(t, bin, dir, env, "-amqp", "-exchange", ex, "-only", "Triage,User")
	customer.stderr.waitFor(t, "type a message")

	customer.line("I want a refund")
	customer.stdout.waitFor(t, "Triage: I can help with that! What is it about?\n")
	customer.line("A pair of shoes I bought")
	customer.stdout.waitFor(t, "[Triage → Refunds]\n")
	customer.stdout.waitFor(t, "Refunds: What is wrong with the shoes?\n")
	customer.line("I want to talk to your manager")
	operator.stdout.waitFor(t, "[Refunds → Triage]\n")
	customer.stdout.waitFor(t, "[Triage → Human]\n")
	operator.stdout.waitFor(t, "--- Human, Triage hands you conversation support")
	operator.stdout.waitFor(t, "Refunds: What is wrong with the shoes?\n")
	operator.stdout.waitFor(t, "User: I want to talk to your manager\n")
	operator.line("Hello this is manager")
	customer.stdout.waitFor(t, "Human: Hello this is manager\n")
	customer.line("Thanks!")
	operator.stdout.waitFor(t, "User: Thanks!\n")
	operator.line("You are welcome.")
	customer.stdout.waitFor(t, "Human: You are welcome.\n")
	customer.line("exit")
	if code := customer.exit(); code != 0 {
		t.Errorf("the customer's process: exit status %d", code)
	}
	if err := operator.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := operator.exit(); code != 0 {
		t.Errorf("the operator's process: exit status %d", code)
	}
	if srv.Left() != 0 {
		t.Errorf("%d model steps left", srv.Left())
	}
}
