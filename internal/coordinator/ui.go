package coordinator

import (
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
// Writes always need the header, so a cookie can never submit or change
// anything. This is the one place the UI's credentials meet the API's
// auth; swap it to change how browsers authenticate.
func uiCredentials(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			if ck, err := r.Cookie(UICookie); err == nil && ck.Value != "" {
				r = r.Clone(r.Context())
				r.Header.Set("Authorization", "Bearer "+ck.Value)
			}
		}
		next.ServeHTTP(w, r)
	})
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
		http.SetCookie(w, &http.Cookie{Name: UICookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
		http.Redirect(w, r, "/ui/", http.StatusSeeOther)
	})
}

// uiLogin checks the form's token like a bearer token and, when it is
// valid, sets it as the UI cookie for 12 hours.
// A cross-site form post (login CSRF: signing a victim in with the
// attacker's token) is refused by its Origin header.
func (c *Coordinator) uiLogin(w http.ResponseWriter, r *http.Request) {
	if o := r.Header.Get("Origin"); o != "" && o != "null" {
		if u, err := url.Parse(o); err != nil || u.Host != r.Host {
			writeError(w, http.StatusForbidden, "forbidden", "login from another origin")
			return
		}
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
