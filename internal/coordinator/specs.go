package coordinator

import (
	"encoding/json"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/rath-run/rath/pkg/agent"
)

// specCache remembers submitted agent specs by their bytes: a client
// submitting many runs of one agent sends the same spec each time, and
// parsing and validating it (agent.ParseSpec reads YAML, a superset of
// JSON) costs more than the rest of a submit's CPU. Only parsed specs and
// their canonical JSON are kept, never errors; both are read-only.
type specCache struct {
	cache *lru.Cache[string, parsedSpec]
}

type parsedSpec struct {
	spec   agent.Spec
	target json.RawMessage // json.Marshal(spec): the run's target
}

// specCacheSize bounds the cache, in distinct specs.
const specCacheSize = 256

func newSpecCache() *specCache {
	c, err := lru.New[string, parsedSpec](specCacheSize)
	if err != nil {
		panic(err) // only for a size below 1
	}
	return &specCache{cache: c}
}

// parse returns raw's spec and its canonical JSON.
func (s *specCache) parse(raw []byte) (agent.Spec, json.RawMessage, error) {
	if p, ok := s.cache.Get(string(raw)); ok {
		return p.spec, p.target, nil
	}
	spec, err := agent.ParseSpec(raw)
	if err != nil {
		return agent.Spec{}, nil, err
	}
	target, err := json.Marshal(spec)
	if err != nil {
		return agent.Spec{}, nil, err
	}
	s.cache.Add(string(raw), parsedSpec{spec: spec, target: target})
	return spec, target, nil
}
