package amqpspace_test

import (
	"testing"

	"github.com/seed72275b23/agency-go/amqpspace"
	"github.com/seed72275b23/agency-go/space"
	"github.com/seed72275b23/agency-go/space/spacetest"
)

func TestConformance(t *testing.T) {
	spacetest.Run(t, func(t *testing.T) space.Space {
		return newSpace(t, amqpspace.Config{})
	})
}
