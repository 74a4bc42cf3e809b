package planhttp

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
)

// web holds the page served at / and its assets.
//
//go:embed web/index.html web/assets/*
var web embed.FS

//go:embed openapi.json
var openapi []byte

var assets, _ = fs.Sub(web, "web")

func serveStatic(w http.ResponseWriter, r *http.Request, _ string) *httpError {
	name := "index.html"
	if f := r.PathValue("file"); f != "" {
		name = path.Join("assets", path.Clean("/" + f)[1:])
	}
	data, err := fs.ReadFile(assets, name)
	if err != nil {
		return errorf(http.StatusNotFound, "Not Found")
	}
	switch path.Ext(name) {
	case ".html":
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
	case ".js":
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	case ".css":
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	}
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(data)
	return nil
}

func serveOpenAPI(w http.ResponseWriter, r *http.Request, _ string) *httpError {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openapi)
	return nil
}
