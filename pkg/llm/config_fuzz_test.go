package llm

import "testing"

// FuzzParseConfig feeds arbitrary config files (YAML) to the parser of the
// user's provider config: it never panics and returns a config or an error.
func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{
		"",
		"default_provider: local\nproviders:\n  local: {base_url: http://127.0.0.1:8080/v1, model: m}\n",
		"providers:\n  x: {api_key: k, unknown: 1}\n",
		"providers: [1, 2]\n",
		"default_provider: 5\n",
		"other: {keep: me}\nproviders: {}\n",
		"{{{",
		"- a\n- b\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := parseConfig(data)
		if err != nil {
			return
		}
		if c == nil {
			t.Fatal("nil config without an error")
		}
	})
}
