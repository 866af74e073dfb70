export function convert(fahrenheit, unit) {
  return { unit, value: Math.round(((fahrenheit - 32) * 5) / 9) };
}
