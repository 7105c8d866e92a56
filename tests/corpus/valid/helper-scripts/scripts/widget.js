// Draws the chart in the page.
document.getElementById('chart');
