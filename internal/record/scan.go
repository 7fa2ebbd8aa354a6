package record

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// scanner reads the JSON of one record line, for the fast event decoder.
// Each method reports false for anything it does not read exactly as
// encoding/json would: the caller then leaves the line to encoding/json.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// next skips white space and consumes c if it comes next.
func (s *scanner) next(c byte) bool {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// end reports whether only white space is left.
func (s *scanner) end() bool {
	s.ws()
	return s.i == len(s.b)
}

// object reads an object, calling field for each key with the scanner at
// its value. Keys with escapes are not read.
func (s *scanner) object(field func(key []byte) bool) bool {
	if !s.next('{') {
		return false
	}
	if s.next('}') {
		return true
	}
	for {
		if !s.next('"') {
			return false
		}
		start := s.i
		for s.i < len(s.b) && s.b[s.i] != '"' && s.b[s.i] != '\\' {
			s.i++
		}
		if s.i == len(s.b) || s.b[s.i] != '"' {
			return false
		}
		key := s.b[start:s.i]
		s.i++
		if !s.next(':') || !field(key) {
			return false
		}
		if s.next('}') {
			return true
		}
		if !s.next(',') {
			return false
		}
	}
}

// token returns the raw string token (quotes included) and whether it
// needs unescaping or UTF-8 repair.
func (s *scanner) token() (tok []byte, plain bool, ok bool) {
	if !s.next('"') {
		return nil, false, false
	}
	start, plain := s.i-1, true
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return s.b[start:s.i], plain, true
		case c == '\\':
			plain = false
			s.i += 2
		case c < 0x20:
			return nil, false, false
		case c >= utf8.RuneSelf:
			plain = false
			s.i++
		default:
			s.i++
		}
	}
	return nil, false, false
}

// str reads a string value.
func (s *scanner) str() (string, bool) {
	tok, plain, ok := s.token()
	if !ok {
		return "", false
	}
	if plain {
		return string(tok[1 : len(tok)-1]), true
	}
	var out string
	if json.Unmarshal(tok, &out) != nil {
		return "", false
	}
	return out, true
}

// number reads an integer literal: no fraction, no exponent.
func (s *scanner) number() ([]byte, bool) {
	s.ws()
	start := s.i
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	digits := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	n := s.i - digits
	if n == 0 || (n > 1 && s.b[digits] == '0') {
		return nil, false
	}
	if s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		return nil, false
	}
	return s.b[start:s.i], true
}

func (s *scanner) int64() (int64, bool) {
	lit, ok := s.number()
	if !ok {
		return 0, false
	}
	if lit[0] != '-' {
		n, ok := digits(lit, 63)
		return int64(n), ok
	}
	n, err := strconv.ParseInt(string(lit), 10, 64)
	return n, err == nil
}

func (s *scanner) uint(bits int) (uint64, bool) {
	lit, ok := s.number()
	if !ok || lit[0] == '-' {
		return 0, false
	}
	return digits(lit, bits)
}

// digits reads a decimal literal that must fit in bits bits.
func digits(lit []byte, bits int) (uint64, bool) {
	if len(lit) > 19 {
		n, err := strconv.ParseUint(string(lit), 10, bits)
		return n, err == nil
	}
	var n uint64
	for _, c := range lit {
		n = n*10 + uint64(c-'0')
	}
	return n, n>>bits == 0 || bits == 64
}

func (s *scanner) boolean() (bool, bool) {
	s.ws()
	rest := s.b[s.i:]
	switch {
	case len(rest) >= 4 && string(rest[:4]) == "true":
		s.i += 4
		return true, true
	case len(rest) >= 5 && string(rest[:5]) == "false":
		s.i += 5
		return false, true
	}
	return false, false
}

// strings reads an array of strings; [] is an empty, non-nil slice.
func (s *scanner) strings() ([]string, bool) {
	if !s.next('[') {
		return nil, false
	}
	out := []string{}
	if s.next(']') {
		return out, true
	}
	for {
		v, ok := s.str()
		if !ok {
			return nil, false
		}
		out = append(out, v)
		if s.next(']') {
			return out, true
		}
		if !s.next(',') {
			return nil, false
		}
	}
}
