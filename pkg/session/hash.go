package session

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"unicode/utf8"
)

// appendHashInput appends in's canonical encoding — byte for byte what
// marshalCanonical(in) writes — without reflection: a step hashes each of
// its versions at Seal and again where a store verifies it, and the
// reflective encoder was most of that cost (issue 25). Anything it is not
// sure to write as the encoder does (a string that needs escaping, a
// non-empty placement, an extra that is not canonical JSON) it hands to
// marshalCanonical, so the two agree on every input;
// FuzzHashInputEncoding holds them to it.
func appendHashInput(buf []byte, in *hashInput) ([]byte, error) {
	buf = append(buf, `{"format":`...)
	buf = appendCanonicalString(buf, in.Format)
	buf = append(buf, `,"id":"`...)
	buf = appendUUID(buf, in.ID)
	buf = append(buf, `","parent_hashes":`...)
	buf = appendStrings(buf, in.ParentHashes)
	buf = append(buf, `,"base_hash":`...)
	buf = appendCanonicalString(buf, in.BaseHash)
	buf = append(buf, `,"op":`...)
	buf = appendCanonicalString(buf, string(in.Op))
	buf = append(buf, `,"chunk_hashes":`...)
	buf = appendStrings(buf, in.ChunkHashes)
	buf = append(buf, `,"len":`...)
	buf = strconv.AppendInt(buf, int64(in.Len), 10)
	buf = append(buf, `,"placement":`...)
	if p := in.Placement; p.Backend == "" && p.Snapshot == "" && p.Spec.IsZero() {
		buf = append(buf, "{}"...)
	} else {
		b, err := marshalCanonical(p)
		if err != nil {
			return nil, err
		}
		buf = append(buf, b...)
	}
	buf = append(buf, `,"usage":{"prompt_tokens":`...)
	buf = strconv.AppendInt(buf, in.Usage.PromptTokens, 10)
	buf = append(buf, `,"completion_tokens":`...)
	buf = strconv.AppendInt(buf, in.Usage.CompletionTokens, 10)
	buf = append(buf, `,"total_tokens":`...)
	buf = strconv.AppendInt(buf, in.Usage.TotalTokens, 10)
	buf = append(buf, `},"producer":{`...)
	first := true
	for _, f := range [...]struct{ name, v string }{
		{`"run":`, in.Producer.Run}, {`"step":`, in.Producer.Step}, {`"agent":`, in.Producer.Agent},
		{`"model":`, in.Producer.Model}, {`"worker":`, in.Producer.Worker}, {`"trace_id":`, in.Producer.TraceID},
	} {
		if f.v == "" {
			continue
		}
		if !first {
			buf = append(buf, ',')
		}
		first = false
		buf = append(buf, f.name...)
		buf = appendCanonicalString(buf, f.v)
	}
	buf = append(buf, `},"extras":`...)
	buf, err := AppendExtrasJSON(buf, in.Extras)
	if err != nil {
		return nil, err
	}
	buf = append(buf, `,"key":`...)
	buf = appendCanonicalString(buf, in.Key)
	buf = append(buf, `,"created_at":`...)
	buf = appendCanonicalString(buf, in.CreatedAt)
	return append(buf, '}'), nil
}

// AppendExtrasJSON appends extras' JSON encoding as a version's hash covers
// it: null for nil, else an array of [key, value] pairs, values in
// canonical JSON, no HTML escaping. It fails on a value that is not JSON.
func AppendExtrasJSON(buf []byte, extras []Extra) ([]byte, error) {
	if extras == nil {
		return append(buf, "null"...), nil
	}
	buf = append(buf, '[')
	for i, e := range extras {
		if i > 0 {
			buf = append(buf, ',')
		}
		if !isCanonical(e.Value) {
			b, err := marshalCanonical(e)
			if err != nil {
				return nil, err
			}
			buf = append(buf, b...)
			continue
		}
		buf = append(buf, '[')
		buf = appendCanonicalString(buf, e.Key)
		buf = append(buf, ',')
		buf = append(buf, e.Value...)
		buf = append(buf, ']')
	}
	return append(buf, ']'), nil
}

// hashOf is the hex sha256 of in's canonical encoding.
func hashOf(in *hashInput) (string, error) {
	var arr [1024]byte
	b, err := appendHashInput(arr[:0], in)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

func appendStrings(buf []byte, ss []string) []byte {
	if ss == nil {
		return append(buf, "null"...)
	}
	buf = append(buf, '[')
	for i, s := range ss {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendCanonicalString(buf, s)
	}
	return append(buf, ']')
}

// appendCanonicalString appends s as marshalCanonical writes a string: as
// it is when the encoder would not escape any of it (valid UTF-8, no
// control byte, quote or backslash, no U+2028/U+2029; with HTML escaping
// off, <, > and & stay), else through the encoder itself.
func appendCanonicalString(buf []byte, s string) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == '"' || c == '\\' {
				return appendEncodedString(buf, s)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError || r == '\u2028' || r == '\u2029' {
			return appendEncodedString(buf, s)
		}
		i += size
	}
	buf = append(buf, '"')
	buf = append(buf, s...)
	return append(buf, '"')
}

func appendEncodedString(buf []byte, s string) []byte {
	b, _ := marshalCanonical(s) // a string always encodes
	return append(buf, b...)
}

// appendUUID appends id's canonical text form (what its MarshalText gives).
func appendUUID(buf []byte, id ID) []byte {
	var text [36]byte
	hex.Encode(text[0:8], id[0:4])
	text[8] = '-'
	hex.Encode(text[9:13], id[4:6])
	text[13] = '-'
	hex.Encode(text[14:18], id[6:8])
	text[18] = '-'
	hex.Encode(text[19:23], id[8:10])
	text[23] = '-'
	hex.Encode(text[24:], id[10:])
	return append(buf, text[:]...)
}
