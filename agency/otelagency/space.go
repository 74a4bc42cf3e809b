package otelagency

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// AttrSpace names the space of a space metric.
const AttrSpace = attribute.Key("agency.space")

// ObserveReconnects reports reconnects, a count that only grows (an
// amqpspace.Space's Reconnects), as the metric agency.space.reconnects
// ({reconnect}) with agency.space = space, through mp (nil: the global
// provider). Unregister the returned registration when the space closes.
//
//	reg, err := otelagency.ObserveReconnects(nil, "amqp", sp.Reconnects)
func ObserveReconnects(mp metric.MeterProvider, space string, reconnects func() int64) (metric.Registration, error) {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(ScopeName)
	c, err := m.Int64ObservableCounter("agency.space.reconnects", metric.WithUnit("{reconnect}"),
		metric.WithDescription("Times the space reconnected to its broker."))
	if err != nil {
		return nil, err
	}
	attrs := metric.WithAttributes(AttrSpace.String(space))
	return m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(c, reconnects(), attrs)
		return nil
	}, c)
}
