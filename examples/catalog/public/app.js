// The front end: reads the API the worker serves next to these files.
const info = await (await fetch('/api')).json();
document.querySelector('#store').textContent = info.store;
const list = document.querySelector('#products');
for (const p of (await (await fetch('/api/products')).json()).items) {
  const item = document.createElement('li');
  item.textContent = `${p.name}: ${(p.price / 100).toFixed(2)}`;
  list.append(item);
}
