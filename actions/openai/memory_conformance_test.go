package openai_test

import (
	"testing"

	"github.com/seed72275b23/agency-go/actions/openai"
	"github.com/seed72275b23/agency-go/actions/openai/memorytest"
)

func TestMemoryConformance(t *testing.T) {
	memorytest.Run(t, func(*testing.T) openai.Memory { return openai.NewMemory(40, 100) })
}
