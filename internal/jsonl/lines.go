// Package jsonl reads line-delimited input with a bound on line length, for
// the JSONL decoders of pkg/session and pkg/openrath.
package jsonl

import (
	"bufio"
	"errors"
	"io"
)

// ErrLineTooLong is returned by [Reader.Next] for a line over the limit.
var ErrLineTooLong = errors.New("line too long")

// Reader reads lines of at most max bytes (without the newline) and never
// buffers more than that, however long the input's lines are.
type Reader struct {
	br   *bufio.Reader
	max  int
	line int // number of the line last returned, from 1
	buf  []byte
}

// NewReader returns a Reader of r whose lines may hold at most max bytes.
func NewReader(r io.Reader, max int) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, 64<<10), max: max}
}

// Line is the number of the line last returned (or refused), from 1.
func (r *Reader) Line() int { return r.line }

// Next returns the next line without its "\n" and whether it ended in one.
// The slice is valid until the next call. At end of input it returns io.EOF.
func (r *Reader) Next() ([]byte, bool, error) {
	r.buf = r.buf[:0]
	for {
		frag, err := r.br.ReadSlice('\n')
		if len(r.buf)+len(frag) > r.max+1 || (err != nil && len(r.buf)+len(frag) > r.max) {
			r.line++
			return nil, false, ErrLineTooLong
		}
		r.buf = append(r.buf, frag...)
		switch {
		case err == nil:
			r.line++
			return r.buf[:len(r.buf)-1], true, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			if len(r.buf) == 0 {
				return nil, false, io.EOF
			}
			r.line++
			return r.buf, false, nil
		default:
			r.line++
			return nil, false, err
		}
	}
}
