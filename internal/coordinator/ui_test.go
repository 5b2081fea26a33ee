package coordinator

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

func TestUICredentials(t *testing.T) {
	t.Parallel()
	var got []string
	h := uiCredentials(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		got = append(got, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
	}))
	const review = "/v1/runs/r1/review"
	ui := map[string]string{"Origin": "http://rath.example", UIHeader: "1"}
	for _, c := range []struct {
		method, path string
		headers      map[string]string
		cookie       bool
		want         string
	}{
		{http.MethodGet, "/v1/runs", nil, true, "Bearer tok"},
		{http.MethodHead, "/v1/runs", nil, true, "Bearer tok"},
		{http.MethodPost, "/v1/runs", nil, true, ""},                                                   // writes never use the cookie
		{http.MethodPost, "/v1/runs", ui, true, ""},                                                    // not even from the UI
		{http.MethodGet, "/v1/runs", map[string]string{"Authorization": "Bearer h"}, true, "Bearer h"}, // the header wins
		{http.MethodGet, "/v1/runs", nil, false, ""},
		// The review button: POST …/review from the UI's own page.
		{http.MethodPost, review, ui, true, "Bearer tok"},
		{http.MethodPost, review, ui, false, ""},
		{http.MethodPost, review, map[string]string{"Origin": "http://rath.example"}, true, ""},                // no UI header (a form)
		{http.MethodPost, review, map[string]string{UIHeader: "1"}, true, ""},                                  // no Origin
		{http.MethodPost, review, map[string]string{"Origin": "http://evil.example", UIHeader: "1"}, true, ""}, // another site
		{http.MethodPost, review, map[string]string{"Origin": "null", UIHeader: "1"}, true, ""},
		{http.MethodPost, "/v1/runs/r1/approvals", ui, true, ""},
		{http.MethodPost, "/v1/runs/r1/cancel", ui, true, ""},
		{http.MethodPost, "/v1/runs/r1/review/x", ui, true, ""},
		{http.MethodPost, "/v1/runs//review", ui, true, ""},
		{http.MethodPut, review, ui, true, ""},
	} {
		r := httptest.NewRequest(c.method, "http://rath.example"+c.path, nil)
		for k, v := range c.headers {
			r.Header.Set(k, v)
		}
		if c.cookie {
			r.AddCookie(&http.Cookie{Name: UICookie, Value: "tok"})
		}
		got = got[:0]
		h.ServeHTTP(httptest.NewRecorder(), r)
		if want := c.method + " " + c.path + " " + c.want; len(got) != 1 || got[0] != want {
			t.Errorf("%s %s %v cookie %v: handler saw %q, want %q", c.method, c.path, c.headers, c.cookie, got, want)
		}
	}
}

func TestUILoginCookie(t *testing.T) {
	t.Parallel()
	c := &Coordinator{cfg: Config{Token: "secret-token"}}
	post := func(token, origin string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "http://rath.example/ui/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		w := httptest.NewRecorder()
		c.uiLogin(w, r)
		return w
	}
	w := post("secret-token", "http://rath.example")
	ck := w.Result().Cookies()
	if w.Code != http.StatusSeeOther || len(ck) != 1 || ck[0].Name != UICookie || ck[0].Value != "secret-token" ||
		!ck[0].HttpOnly || ck[0].SameSite != http.SameSiteStrictMode {
		t.Fatalf("good token: %d, cookies %+v", w.Code, ck)
	}
	if w := post("wrong", "http://rath.example"); len(w.Result().Cookies()) != 0 || !strings.Contains(w.Header().Get("Location"), "login=failed") {
		t.Fatalf("wrong token: %d %q, cookies %v", w.Code, w.Header().Get("Location"), w.Result().Cookies())
	}
	for _, origin := range []string{"http://evil.example", "null", "", "http://rath.example.evil.example", "http://rath.example:8080", "rath.example"} {
		if w := post("secret-token", origin); w.Code != http.StatusForbidden || len(w.Result().Cookies()) != 0 {
			t.Errorf("login with Origin %q: %d, cookies %v; want 403 and no cookie", origin, w.Code, w.Result().Cookies())
		}
	}
	if w := post("secret-token", "https://RATH.example"); w.Code != http.StatusSeeOther || len(w.Result().Cookies()) != 1 {
		t.Errorf("login through a TLS proxy (Origin https, host in capitals): %d; want 303 and the cookie", w.Code)
	}
}

func TestUILogoutOrigin(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	(&Coordinator{}).uiRoutes(mux)
	for origin, want := range map[string]int{"http://rath.example": http.StatusSeeOther, "http://evil.example": http.StatusForbidden, "null": http.StatusForbidden, "": http.StatusForbidden} {
		r := httptest.NewRequest(http.MethodPost, "http://rath.example/ui/logout", nil)
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		if w.Code != want {
			t.Errorf("logout with Origin %q: %d, want %d", origin, w.Code, want)
		}
	}
}
