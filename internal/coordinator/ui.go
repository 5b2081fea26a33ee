package coordinator

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/rath-run/rath/internal/ui"
)

// UICookie holds the API token a browser logged in with (HttpOnly,
// SameSite=Strict).
const UICookie = "rath_ui_token"

// uiCredentials lets the web UI's cookie stand in for the bearer token on
// read-only requests: a GET or HEAD without an Authorization header but
// with the UI cookie is authenticated as if it carried "Bearer <cookie>".
// The one write it lends the cookie to is the UI's review button, POST
// /v1/runs/{id}/review, and only from a page of this server (uiDecision).
// Every other write needs the header, so a cookie can submit nothing and
// change nothing else. This is the one place the UI's credentials meet the
// API's auth; swap it to change how browsers authenticate. The token's
// scopes and tenant apply unchanged (a review needs submit scope).
func uiCredentials(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" && (r.Method == http.MethodGet || r.Method == http.MethodHead || uiDecision(r)) {
			if ck, err := r.Cookie(UICookie); err == nil && ck.Value != "" {
				r = r.Clone(r.Context())
				r.Header.Set("Authorization", "Bearer "+ck.Value)
			}
		}
		next.ServeHTTP(w, r)
	})
}

// UIHeader is the header the web UI's decision buttons send: an HTML form
// cannot set it, and a script on another site cannot send it without a
// CORS preflight this server never answers.
const UIHeader = "X-Rath-UI"

// uiDecision reports whether r is the web UI's review button: POST
// /v1/runs/{id}/review with the UI header from a page of this server
// (sameOrigin; the cookie is SameSite=Strict besides).
func uiDecision(r *http.Request) bool {
	if r.Method != http.MethodPost || r.Header.Get(UIHeader) == "" || sameOrigin(r) != nil {
		return false
	}
	parts := strings.Split(r.URL.Path, "/")
	return len(parts) == 5 && parts[0] == "" && parts[1] == "v1" && parts[2] == "runs" && parts[3] != "" && parts[4] == "review"
}

// uiRoutes mounts the web UI: its files under /ui/, its settings at
// /ui/config.json, and the login form's POST /ui/login (token → cookie)
// and POST /ui/logout.
func (c *Coordinator) uiRoutes(mux *http.ServeMux) {
	mux.Handle("GET /ui/", http.StripPrefix("/ui", ui.Handler()))
	mux.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui/", http.StatusMovedPermanently)
	})
	mux.HandleFunc("GET /ui/config.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusOK, map[string]any{"auth": c.authOn(), "jaeger_url": strings.TrimRight(c.cfg.JaegerURL, "/")})
	})
	mux.HandleFunc("POST /ui/login", c.uiLogin)
	mux.HandleFunc("POST /ui/logout", func(w http.ResponseWriter, r *http.Request) {
		// Logging a victim out from another site is a nuisance, not a
		// breach, but costs nothing to refuse.
		if err := sameOrigin(r); err != nil {
			writeError(w, http.StatusForbidden, "forbidden", "logout: "+err.Error())
			return
		}
		http.SetCookie(w, &http.Cookie{Name: UICookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
		http.Redirect(w, r, "/ui/", http.StatusSeeOther)
	})
}

// sameOrigin reports whether r, a browser's form post, comes from a page
// of this server: its Origin header names the host the request was sent
// to. Browsers send Origin on every POST; a missing Origin (a client that
// is not a browser, or a very old one) and "null" (sandboxed frames, data:
// and file: pages, some redirects) are refused, since either may be a
// cross-site post. The scheme is not compared: a TLS-terminating proxy
// forwards https pages' posts over http.
func sameOrigin(r *http.Request) error {
	o := r.Header.Get("Origin")
	switch o {
	case "":
		return errors.New("the Origin header is missing; log in from the web UI's own page")
	case "null":
		return errors.New(`the origin "null" is not this server; log in from the web UI's own page`)
	}
	u, err := url.Parse(o)
	if err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host) {
		return fmt.Errorf("the origin %q is not this server (%s)", o, r.Host)
	}
	return nil
}

// uiLogin checks the form's token like a bearer token and, when it is
// valid, sets it as the UI cookie for 12 hours.
// A cross-site form post (login CSRF: signing a victim in with the
// attacker's token) is refused by its Origin header (sameOrigin).
func (c *Coordinator) uiLogin(w http.ResponseWriter, r *http.Request) {
	if err := sameOrigin(r); err != nil {
		writeError(w, http.StatusForbidden, "forbidden", "login: "+err.Error())
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	token := strings.TrimSpace(r.PostFormValue("token"))
	if token == "" {
		http.Redirect(w, r, "/ui/?login=empty", http.StatusSeeOther)
		return
	}
	if c.authOn() {
		if _, err := c.authenticator().Authenticate(r.Context(), "Bearer "+token); err != nil {
			http.Redirect(w, r, "/ui/?login=failed", http.StatusSeeOther)
			return
		}
	}
	http.SetCookie(w, &http.Cookie{
		Name: UICookie, Value: token, Path: "/", Expires: time.Now().Add(12 * time.Hour),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	http.Redirect(w, r, "/ui/", http.StatusSeeOther)
}
