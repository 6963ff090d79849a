/**
 * A statement text that depends on a count (ids bound, rows of VALUES, a LIMIT written in the
 * text), made once per count and kept: the text is also the key of the prepared-statement cache,
 * so building it anew for every call cost a string join per claim or settle batch.
 */
export function bySize(make: (n: number) => string): (n: number) => string {
  const texts: string[] = [];
  return (n) => {
    let text = texts[n];
    if (text === undefined) {
      text = make(n);
      texts[n] = text;
    }
    return text;
  };
}
