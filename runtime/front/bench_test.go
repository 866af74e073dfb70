package main

// What the front costs on large bodies (bench/RESULTS.md "R2 through the binding"): a 1 MiB
// answer (of known length, and streamed as workerd streams, in 16 KiB chunks) and a 1 MiB
// request body, through the proxy over loopback TCP, against the same stand-in workerd asked
// straight over its Unix socket. Run:
//   go test -run '^$' -bench Large -benchtime 300x -count 3 [-cpuprofile cpu.out]

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"testing"
)

const largeBody = 1 << 20

// largeWorkerd answers GET with 1 MiB (of known length, or in chunks when ?chunked) and PUT with
// the size of the body it read.
func largeWorkerd(t *testing.T) string {
	payload := make([]byte, largeBody)
	return standInWorkerd(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			n, _ := io.Copy(io.Discard, r.Body)
			_, _ = io.WriteString(w, strconv.FormatInt(n, 10))
			return
		}
		if r.URL.RawQuery != "chunked" {
			w.Header().Set("Content-Length", strconv.Itoa(largeBody))
			_, _ = w.Write(payload)
			return
		}
		for piece := range slices.Chunk(payload, 16<<10) { // each a chunk of its own
			_, _ = w.Write(piece)
		}
	}))
}

func benchLarge(b *testing.B, client *http.Client, base, method, query string) {
	b.Helper()
	body := make([]byte, largeBody)
	b.SetBytes(largeBody)
	b.ResetTimer()
	for range b.N {
		var reader io.Reader
		if method == http.MethodPut {
			reader = bytes.NewReader(body)
		}
		req, _ := http.NewRequest(method, base+"/large"+query, reader)
		res, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, res.Body)
		res.Body.Close()
		want := int64(largeBody)
		if method == http.MethodPut {
			want = int64(len(strconv.Itoa(largeBody)))
		}
		if n != want {
			b.Fatalf("%d bytes", n)
		}
	}
}

func BenchmarkLarge(b *testing.B) {
	t := &testing.T{} // the helpers' cleanups are not run: the process ends with the benchmark
	socket := largeWorkerd(t)
	straight := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return dialUnix(socket)(ctx) },
	}}
	addr, _ := frontServing(t, dialUnix(socket))
	through := &http.Client{Transport: &http.Transport{}}
	for _, c := range []struct{ name, method, query string }{
		{"GetSized", http.MethodGet, ""}, {"GetChunked", http.MethodGet, "?chunked"}, {"Put", http.MethodPut, ""},
	} {
		b.Run(c.name+"/straight", func(b *testing.B) { benchLarge(b, straight, "http://workerd", c.method, c.query) })
		b.Run(c.name+"/front", func(b *testing.B) { benchLarge(b, through, "http://"+addr, c.method, c.query) })
	}
}
