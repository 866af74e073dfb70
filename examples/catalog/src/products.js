// The catalog's data. A real application would read it from a database or an API.
export const products = [
  { id: 'p-1', name: 'Canvas tote', price: 1800, tags: ['bags'] },
  { id: 'p-2', name: 'Enamel mug', price: 1200, tags: ['kitchen'] },
  { id: 'p-3', name: 'Linen apron', price: 3400, tags: ['kitchen', 'textiles'] },
  { id: 'p-4', name: 'Wool blanket', price: 8900, tags: ['textiles'] },
  { id: 'p-5', name: 'Field notebook', price: 900, tags: ['paper'] },
];
