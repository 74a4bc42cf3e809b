package amqpspace_test

import (
	"context"
	"errors"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/seed72275b23/agency-go/amqpspace"
)

// With ExchangeMustExist, a misspelt exchange is ErrNoExchange and leaves
// nothing behind on the broker; an exchange that exists is joined.
func TestExchangeMustExist(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	name := testExchange(t) // deleted at the end, should it be created
	_, err := amqpspace.New(ctx, amqpspace.Config{URL: brokerURL(t), Exchange: name, ExchangeMustExist: true})
	if !errors.Is(err, amqpspace.ErrNoExchange) {
		t.Fatalf("New on a missing exchange: %v, want ErrNoExchange", err)
	}
	ch := bareChannel(t)
	err = ch.ExchangeDeclarePassive(name, "topic", true, false, false, false, nil)
	var ae *amqp.Error
	if !errors.As(err, &ae) || ae.Code != amqp.NotFound {
		t.Fatalf("the exchange is on the broker after all: %v", err)
	}

	newSpace(t, amqpspace.Config{Exchange: name}) // declares it
	sp := newSpace(t, amqpspace.Config{Exchange: name, ExchangeMustExist: true})
	addAll(t, sp, newEcho())
}
