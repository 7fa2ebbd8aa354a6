package lineage

// Plural returns one when n is 1, many otherwise: the noun after a count
// ("1 problem", "2 problems").
func Plural[N ~int | ~int32 | ~int64 | ~uint | ~uint32 | ~uint64](n N, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
