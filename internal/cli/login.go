package cli

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rath-run/rath/pkg/client"
	"github.com/rath-run/rath/pkg/llm"
)

// defaultServer is the coordinator rathctl talks to when nothing names one.
const defaultServer = "http://127.0.0.1:7420"

// loginSection is the config file's "server" section, written by `rathctl
// login`: the coordinator and the token to send it.
type loginSection struct {
	URL   string `json:"url"`
	Token string `json:"token"`
}

// savedLogin reads the login section of the config file; the zero value
// when there is none (or the file cannot be read: commands then fall back
// to the flags and environment, and `rathctl login` reports the error).
func savedLogin() loginSection {
	path, err := llm.ConfigPath(os.Getenv)
	if err != nil {
		return loginSection{}
	}
	c, err := llm.LoadConfig(path)
	if err != nil {
		return loginSection{}
	}
	var l loginSection
	if raw, ok := c.Other["server"]; ok {
		_ = json.Unmarshal(raw, &l)
	}
	return l
}

// sameServer compares coordinator URLs, ignoring a trailing slash.
func sameServer(a, b string) bool {
	return strings.TrimRight(a, "/") == strings.TrimRight(b, "/")
}

// apiServer resolves the coordinator URL: the flag, RATH_SERVER, the
// logged-in server, the default.
func apiServer(flag string) string {
	return cmp.Or(flag, os.Getenv("RATH_SERVER"), savedLogin().URL, defaultServer)
}

// apiToken resolves the token to send to server: the flag, RATH_TOKEN, or
// the token `rathctl login` stored for that same server (never another's).
func apiToken(flag, server string) string {
	if t := cmp.Or(flag, os.Getenv("RATH_TOKEN")); t != "" {
		return t
	}
	if l := savedLogin(); l.Token != "" && sameServer(l.URL, server) {
		return l.Token
	}
	return ""
}

func newLoginCmd(env *Env) *cobra.Command {
	var f configFlags
	var server string
	c := &cobra.Command{
		Use:   "login [--server URL]",
		Short: "store an API token for a coordinator in the config file (token read from stdin)",
		Long: `login reads an API token (rath_…) from stdin, checks it against the coordinator
(GET /v1/whoami), and stores the server and token in the config file
($RATH_HOME/config.yaml or ~/.rath/config.yaml, mode 0600). rathctl then sends
that token to that server, and only to that server. RATH_TOKEN or --token still
win when set. The token never appears on the command line, so it stays out of
shell history and process listings.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			server = cmp.Or(server, os.Getenv("RATH_SERVER"), defaultServer)
			if u, err := url.Parse(server); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return &exitError{code: 2, err: fmt.Errorf("--server %q: want an http:// or https:// URL", server)}
			}
			line, err := bufio.NewReader(env.In).ReadString('\n')
			if err != nil && !errors.Is(err, io.EOF) {
				return fmt.Errorf("read token from stdin: %w", err)
			}
			token := strings.TrimSpace(line)
			if token == "" {
				return &exitError{code: 2, err: errors.New("no token on stdin (rathctl login --server URL < token-file)")}
			}
			cl, err := client.New(server, token)
			if err != nil {
				return &exitError{code: 2, err: fmt.Errorf("--server: %w", err)}
			}
			who, err := cl.WhoAmI(cmd.Context())
			if err != nil {
				return fmt.Errorf("login: %w", err)
			}
			path, cfg, err := f.load()
			if err != nil {
				return err
			}
			raw, err := json.Marshal(loginSection{URL: server, Token: token})
			if err != nil {
				return err
			}
			if cfg.Other == nil {
				cfg.Other = map[string]json.RawMessage{}
			}
			cfg.Other["server"] = raw
			if err := llm.SaveConfig(path, cfg); err != nil {
				return err
			}
			if f.output == "json" {
				return json.NewEncoder(env.Out).Encode(map[string]any{"server": server, "principal": who, "config": path})
			}
			_, err = fmt.Fprintf(env.Out, "logged in to %s as %s (tenant %s, scope %s); token stored in %s\n",
				server, cmp.Or(who.Name, who.TokenID, "anonymous"), who.Tenant, who.Scope, path)
			return err
		},
	}
	c.Flags().StringVar(&f.file, "file", "", "config file (default $RATH_HOME/config.yaml, else ~/.rath/config.yaml)")
	c.Flags().StringVarP(&f.output, "output", "o", "text", "output format: text or json")
	c.Flags().StringVar(&server, "server", "", "coordinator URL (default $RATH_SERVER, else "+defaultServer+")")
	return c
}
